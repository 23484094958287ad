//! Which arrays a compiled function frees itself (docs/codegen.md, "Freeing
//! arrays"): the allocations whose every reference provably dies inside the
//! function, or dies inside it except for the references tapes hold, which
//! the run counts; so that a loop allocating a temporary per iteration runs
//! in bounded memory, as in the interpreter (issue 27, finding 6), also when
//! reverse mode records it (issue 24).
//!
//! A *site* is a statement that makes a new array of the run's arena:
//! `alloc`, `zeros`, `copy` or `sdense`; or a `pop` of an array (of type
//! `[T]`), which takes a reference from its tape. Its value `a` *reaches* a
//! value `v` when `v` is `a`, or is made from a value `a` reaches by
//! `tuple`, `dual`, `getfield`, `primal`, `tangent` or `select` (results
//! that can hold an array only), or by a phi in a block that the site's
//! block strictly dominates. A site is *let go of* when no value it reaches
//! is
//! - returned,
//! - pushed on a tape, except `a` itself as it is (below),
//! - passed to a call through a function value (the callee, unknown, may
//!   keep it), or to a parameter of an `invoke`d function that may keep it
//!   (see below), or
//! - an operand of any primitive not listed here, or an operand of a phi
//!   in a block the site's block does not strictly dominate (a loop-carried
//!   phi may hold the array of the previous iteration; such a phi may
//!   instead own the site's arrays, "Owning phis" below).
//!
//! Element reads and writes, `length`, `copy` (the source) and the bulk
//! and sparse bulk primitives read or write elements and keep no reference.
//!
//! Calls. A function *keeps* its parameter when a value the parameter
//! reaches (by the rules above, every phi counting) is returned, pushed,
//! passed through a function value or to a parameter its callee keeps
//! ([`Summaries`]: the least such set over the call graph, so a parameter
//! passed around a recursion and nowhere else is not kept). A callee that
//! does not keep a parameter holds no reference to it once it returns, and
//! its result holds none either (that would be returning it).
//!
//! How ([`Letgo`]). A site that makes arrays and never pushes `a` is
//! *freed*; one that pushes `a` is *released*; a pop is *dropped*. The
//! lowering (`Lower::block`) keeps, in a stack slot per site, the array
//! the site made or popped last (null at entry); the site lets go of that
//! array just before it runs again, and a normal return lets go of every
//! slot's array. An error return lets go of nothing: the run's end frees
//! the arena. Letting go is `irad_rt_free` for a freed site. For the
//! others the run counts references (runtime/src/arena.rs): a push of a
//! released site's `a` stores a *tagged* word (the address with its low
//! bit set; elements are 16-byte aligned) and counts one reference in the
//! array's header; a pop of an array clears the bit; a dropped pop keeps
//! the word it read in its slot, and a push of its `a` as it is pushes
//! that word again, counting one more reference when it is tagged;
//! letting go of a tagged word counts one down (an untagged one: nothing,
//! tested inline), and a released site's letting go marks the array given
//! up. The array is freed when it is given up and no reference is counted,
//! by whichever comes last.
//!
//! Soundness. Arrays are references, so the question is whether any value
//! that may still be used refers to the array freed. Let `D` be the site's
//! statement and `v` a value it reaches. Every such `v` is defined by a
//! statement that `D` dominates: a pure primitive's operands dominate it,
//! and the phis admitted are in blocks `D`'s block strictly dominates. Now
//! suppose `D` runs again (or the function returns): a later use `U` of
//! `v` is dominated by `v`'s definition `V`. Any path from `D`'s new run
//! to `U` must pass `V` again: otherwise, as `D` dominates `V`, the path
//! from the entry to `D`'s first run (which need not pass `V`) followed by
//! this one would reach `U` without passing `V`. So `U` sees a `v` made
//! after `D` ran again, from the new array, never the old one. Values not
//! reached hold no reference to it: the rules above list every way a
//! reference is copied within a function (arrays hold only scalars), and
//! the excluded uses are every way one leaves it (returns, tapes, calls).
//! A return ends every use. So when a site lets go, no value of its
//! function will use that array again.
//!
//! Owning phis. A phi `p` of type `[T]` in block `H` *owns* (and
//! [`owning_phis`] finds) the arrays it receives when every entry of it is
//! the value `s` of a site that makes arrays (not a pop, not an argument,
//! not a call's result but a fresh one, "Fresh results" below), and, for
//! each such `s` of block `S`:
//! - `p` is the only phi `s` is an operand of;
//! - no value `s` reaches, other than through `p`, escapes (the rules
//!   above, with `p` the one phi not followed and not counted as an
//!   escape), nor is used in a block of `R`: the blocks a run entering
//!   `H` may reach before `S` runs again (those reachable from `H` without
//!   entering `S`, `H` included; none when `S` is `H`, since all of `H`
//!   runs on every entry);
//! - no entry of `p` carrying `s` comes from a block of `R` (the same
//!   array would enter `p` twice);
//!
//! and `p` itself stays inside as a site of block `H` does (above, phis
//! counting only in blocks `H` strictly dominates; so no entry of `p` is
//! `p` or reaches from it). The sites are *handed over*: they let go of
//! nothing; `p` gets a slot, and on each entry of `H` lets go of the array
//! it held before (null at the first) and holds the new one; a normal
//! return lets go of it as of every slot. It frees, or releases when `p`
//! or any of its sites is pushed as it is (those pushes are then counted,
//! as a released site's).
//!
//! Why that is sound. Let `X` be an array a site `s` made at one of its
//! runs. Every reference to `X` is held by `p`, a value `p` reaches, a
//! value `s` reaches without `p`, or a tape. `p` receives `X` at an entry
//! of `H` after that run and lets go of it at the next entry (or return),
//! which is after at least one entry of `H` following the run, and does so
//! only once: `X` enters `p` only once (the last rule, as `s` makes a new
//! array each run), and no other phi nor site ever lets go of `X`, since
//! the sites are handed over, `s` is an operand of no other phi, and a
//! phi's entries are all sites' values (so no owning phi or site reaches
//! another owning phi). The values `p` reaches: the argument for sites
//! above, with `p`'s statement as `D`, run at each entry of `H`. The values
//! `s` reaches: a use `U` of one, `v` defined by `V`, after an entry of `H`
//! that follows the run, is either in a block of `R` (excluded) or comes
//! after `S` ran again, and then (as above, `s` dominating `V`) after `V`
//! ran again, seeing a value from a new array. The tapes: counted as
//! above, the phi's letting go being the maker's giving up.
//!
//! Latch-owning phis. A loop's phi entered from outside with an array it
//! did not make (an argument, a pop, another loop's phi: a checkpoint's
//! replay enters its loops with popped snapshots) owns nothing by the rule
//! above, and the arrays its latch brings each iteration stayed until the
//! run's end. A phi `p` of type `[T]` of block `H` *owns what its latch
//! brings* ([`latch_owning`]) when `H` has exactly one predecessor it
//! does not dominate (the loop's entry, with any operand `e`), every other
//! entry is the value `s` of a site that makes arrays, handed over as to an
//! owning phi (same rules), and every value `p` reaches stays inside the
//! function but for uses outside the loop's body (the blocks reaching a
//! latch without passing `H`), which are neither followed nor escapes: the
//! loop's last array may go on after it, never let go of here. `p` pushed
//! as it is counts its reference only when it holds an array other than
//! `e` (tagged when `p != e`, as is at the entry). `p` gets a slot, which
//! holds the array `p` has when a latch brought it and null otherwise: on
//! each entry of `H` with `p != e` (from a latch: its sites make a new
//! array each run, never `e`, which is alive) it lets go of the slot's
//! array and holds the new one; with `p == e` (from outside; or a new
//! array at `e`'s address after `e` was freed, which only leaks) it sets
//! the slot to null without letting go, since the last array of the
//! previous run of the loop may have left it (it may be `e` itself). When
//! no value reaches outside the body, the slot's array is also let go of
//! on every entry from outside and at a normal return; otherwise never.
//! Uses outside the body that keep no reference (element reads, `length`,
//! a copy's source, the bulk primitives: [`PrimUse::Keeps`]) and pushes of
//! `p` itself (counted as inside) do not count as reaching outside.
//!
//! *Exit phis.* A site `s` of a loop's body handed over to the phi `p` of
//! its header `H` may also be an entry of phis outside the body (`a = b; if done {
//! break; }`: the phi after the loop takes `b` on the `break` edge). Such
//! a use of `s` itself is neither followed nor an escape, and the array it
//! carries is never let go of (it stays, one per run of the loop): it was
//! made in the iteration that left, after the last entry of `H` (`s`'s
//! statement dominates the edge, so every path to it from `H`'s latest
//! entry passes it), so it never entered `p`, and no other phi nor site
//! lets go of it (handed over; a phi outside the body that could own it
//! would need `p` outside its own loop's body, and `p` is inside it). A
//! site is handed over to at most one phi (checked again after the
//! search).
//!
//! *Entered with a site's array.* When `e` is the value of a site that
//! makes arrays and is not handed over (a replay's fresh start shadow),
//! `p` counts every push of itself, `p == e` included (`e`'s array is the
//! arena's), and `e`'s own walk takes those pushes as pushes of `e` as it
//! is ([`Freed::entered`]): the tape's references to `e`'s array through
//! `p` are then all counted, as a released site's must be.
//!
//! Why that is sound. Let `X` be an array `s` made, entering `p` from a
//! latch. The slot lets go of `X` only at the next entry of `H` from a
//! latch: the loop went round again without leaving, so `X` never reached
//! a use outside the body (a path out of the loop and back in passes the
//! entry, and would have set the slot to null). Inside the body, the
//! argument of owning phis holds: values `p` reaches are defined in blocks
//! `H` dominates and are defined again after the entry before any use;
//! `s`'s values, by the hand-over rules. No other site or phi lets go of
//! `X` (handed over; `s` enters no other phi), and `e` is never in the
//! slot. With no use outside the body, `X` is dead once `H` is entered
//! from outside again or the function returns, by the same argument; a use
//! outside it that keeps no reference is a use of a value `p` reaches (an
//! element read ends with the statement), so it too sees a value defined
//! after the last entry of `H`, and a push of `p` is counted. For `e`
//! entered with a site's array `E`: every tape entry holding `E` comes
//! from a push of `e` or of `p` (a value `e` reaches), each counted, and
//! `e` lets go of `E` only as a released site does, at its next run or
//! the return; `p`'s slot never holds `E`.
//!
//! *Entered with a pop.* When `e` is a pop of an array (a replay's loop
//! entered with the snapshot's array as popped), `p` likewise counts every
//! push of itself: while it holds `e`'s array it pushes the word the pop
//! read (tagged or not, counting one more reference when tagged, as a
//! push of `e` as it is does), and otherwise its own array tagged; `e`'s
//! walk takes those pushes as its own, so the pop is dropped. Only when it
//! is: a pop that may not let go (its array reaching an escape) leaves
//! `p` a latch-owning phi like any other ([`Freed::entered`] holds only
//! dropped pops). Sound as for a site: every tape entry holding `e`'s
//! array comes from a push of `e`, or of `p` or a phi entered with it
//! holding that array, each pushing the pop's word again; `e` lets go of
//! its reference only as a dropped pop does; and `p`'s slot never holds
//! `e`'s array. The test `p == e` compares addresses: it names the array
//! only because the pop's array stays alive while `p` may be pushed (the
//! pop lets go at its next run or the return, and `p` is defined again
//! after the pop runs again; an untagged word is never freed here), so no
//! other array can have its address meanwhile. The same holds for the
//! arrays a handing chain is entered with, below.
//!
//! *Entered through a select.* When `e` is `select(c, s, x)` of such a
//! site `s` and another array `x` (a replay's start shadow: a fresh one or
//! the one it was given), `p` and `e` count every push of themselves but
//! when they hold `x` and that is not `s`'s array (`x` may be a value `s`
//! reaches: a review found that case freed under a tape) ([`Freed::through`]),
//! and `s`'s walk takes those pushes as its own: every tape entry holding
//! `s`'s array is counted.
//!
//! *Entered with an entered phi.* A latch-owning phi `p` entered with
//! another, `q`, that is entered so with site `s` (a replay's recording
//! loop, entered with the phi of its split, entered with the new copy the
//! replay starts from) counts every push of itself as `q` does (but of
//! `q`'s `x`), and `s`'s walk takes those too: `p` holds `q`'s array
//! (`s`'s, one `q`'s latch brought, or `x`) or one its own latch brought,
//! all of the arena but `x`, so every tape entry holding `s`'s array is
//! counted still.
//!
//! *Leaving into a counting phi.* A latch-owning phi `p` whose last array
//! may leave its loop lets go of nothing after it, so a replay whose split
//! loop handed its last array to the recording loop kept that array until
//! the run's end, one per replay that split. When every use of a value `p`
//! reaches after its loop keeps no reference, pushes `p` itself, or is `p`
//! itself entering a latch-owning phi `q` from outside `q`'s loop, where
//! each such `q` counts every push of itself (*entered* as above) and
//! keeps its own arrays inside its loop (or is such a phi itself), `p`
//! lets go of the array its slot holds at a normal return
//! ([`Freed::at_return`]); entered from outside, it still only empties
//! its slot. Sound: at the return no value of the function is used again;
//! a reference to the slot's array (one a latch of `p` brought: of the
//! arena, never `p`'s entry) can only be held by values `p` or `q`
//! reaches, dead then, or by tape entries from pushes of `p` or `q`, all
//! counted (`p` counts its own arrays, and `q` every push of itself), so
//! `p` releases it (gives it up, freed once those references are gone)
//! even when `p` itself is never pushed and would otherwise free (a
//! review found that freeing under the tape's references: `at_return` of
//! tests/free_arrays/loops.irad); `q` never lets go of the array it is
//! entered with, a handing chain entered with `p` neither (below), and no
//! site lets go of it (handed over).
//!
//! Handing chains. A loop that keeps its last arrays (`prev = cur; cur =
//! next;`) has header phis each of which takes, from every latch, the
//! array the next one held: `p_1 <- p_2 <- ... <- p_k`, the head `p_k`
//! taking from every latch the values of sites that make arrays. None owns
//! anything by the rules above (`p_k`'s value enters `p_{k-1}` in its own
//! block; `p_{k-1}`'s latch brings a phi), and before chains every array
//! such a loop made stayed until the run's end. Such phis form a *handing
//! chain* ([`handing`], [`Chain`]) when each is entered from one block
//! outside the loop, `p_i` (`i < k`) is taken by `p_{i-1}` alone, the
//! head's sites are handed over to it (as to a latch-owning phi), and
//! every value each phi reaches stays inside the loop but for uses after
//! it, the next phi's entry being neither followed nor an escape. Each
//! phi has a slot, holding the array the phi has when that array was made
//! by the head's sites since the loop was last entered from outside, and
//! null otherwise. Entering the header from a latch (the head's new array
//! is not its entry), the tail's slot lets go of its array, each other
//! slot moves one place down the chain, and the head's holds the head's
//! new array; from outside, the slots are emptied, letting go of their
//! arrays unless a value may leave the loop (then never; likewise at the
//! return). A push of a chain phi holding the array in its slot is
//! tagged; one holding an array the chain was entered with counts as that
//! entry's site's push when that is a site making arrays, a dropped pop
//! (its word), or a latch-owning phi entered with a site (tagged), whose
//! walks take those pushes as their own ([`Chain::entered`]); any other
//! array is pushed untagged.
//!
//! Why that is sound. By induction over the entries of the header, each
//! slot holds what its phi holds when the head's sites made it in this
//! run of the loop, else null: an entry from outside gives every phi an
//! array from outside the run (slots null); one from a latch gives the
//! head a new array (its slot) and each other phi its successor's array
//! (its successor's slot's). An array the head's sites made is so held by
//! one phi at a time, moving down one place per iteration, and the tail's
//! array is held by no phi once the tail takes its successor's: values
//! the phis reach are defined again after the entry before any use (the
//! argument for sites, with the header's entry as the statement), the
//! sites' values are not used before they run again (handed over), and no
//! other owner lets go of it. So the array the tail's slot lets go of is
//! dead. The entering arrays are never in a slot, so the chain never lets
//! go of them; a push of any array the chain holds is counted unless it is
//! an array from outside the run that no site of this function lets go of.
//!
//! Choosing phis. A loop that replaces its array on some iterations only
//! (`if better { a = b; }`) has a header phi `p` whose latch brings a phi
//! of `p` itself and a new array: it owns nothing by the rules above, and
//! every array such a loop made stayed until the run's end. A phi `p` of
//! type `[T]` of header `H` is a *choosing phi* ([`choosing`], [`Web`])
//! when
//! - `H` is entered from exactly one block outside its loop (any operand
//!   `e`), and every edge into `H` is a `goto` (the lowering lets go on
//!   those edges, [`Web`]);
//! - its *web*, the values its latch entries bring through phis, holds
//!   only `p`, phis of blocks of the loop's body that `H` strictly
//!   dominates (the web's phis) and sites that make arrays in such blocks
//!   (the web's sites), at least one phi and one site;
//! - no web phi nor site is on a cycle of the body that does not pass `H`
//!   (each runs at most once between two entries of `H`);
//! - every value `p` or a web phi reaches stays inside the loop but for
//!   uses after it (as for a latch-owning phi), uses as an entry of a web
//!   phi neither followed nor escapes, and no web phi but `p` is pushed as
//!   it is;
//! - every value a web site reaches stays inside the function but for
//!   those uses and uses after the loop, and is not used in a block a run
//!   entering `H` may reach before the site runs again ([`unrepeated`]).
//!
//! Each web site keeps its slot, and `p` one. On the edge from outside,
//! the slots are emptied, letting go of their arrays unless a web value
//! is used after the loop (then they stay, as a latch-owning phi's). On
//! an edge from a latch, with `n` the array `p` is entered with: each
//! site's slot lets go of its array unless it is `n`, and is emptied; when
//! one was `n`, `p`'s slot lets go of the array it held and holds `n`. A
//! normal return lets go of all of them unless they may have left the
//! loop. All let go the same way: released when `p` or a site is pushed.
//!
//! Why that is sound. Between two entries of `H` each web site runs at
//! most once, so at a latch edge its slot holds the array it made in this
//! iteration, or nothing. The value `n` is `p`'s array or the array of a
//! site that ran in this iteration (a site entry of a web phi is on an
//! edge its site's block dominates, and a block reached from `H` without
//! the site running again is not dominated by it), so a site's slot is
//! `n` exactly when the iteration replaced the array, and `p`'s slot then
//! held the array replaced. That array, and every site array that is not
//! `n`, is dead: values `p`, the web's phis and the sites reach are
//! defined again after the next entry of `H` before any use (the argument
//! for sites, with `H`'s entry as the statement) or are not used before
//! the site runs again, the edge leaves no use behind it, and no other
//! owner lets go of them (a site is claimed by one owner at most).
//! `p`'s slot only ever holds a site's array, never `e`. The pushes of
//! `p` are counted unless it holds `e` (as a latch-owning phi's), those
//! of a site always.
//!
//! Sharing webs. A loop keeping its best iterate by reference (`r =
//! step(r); if better { keep = r; }`) has header phis that may hold one
//! array between them: the step's new array enters `r` and, on some
//! iterations, `keep`. No phi owns it by the rules above (a site entering
//! two phis escapes), so every array such a loop made stayed until the
//! run's end. A set `W` of at least two phis of type `[T]` of header `H`
//! (or of one, below: "Webs of one phi") is a *sharing web*
//! ([`sharing::sharing`]) when
//! - `H` is entered from exactly one block outside its loop and by `goto`
//!   edges only, every phi of `W` having an entry per edge (any operand
//!   from outside);
//! - each phi's latch entries bring, through phis of blocks of the body
//!   that `H` strictly dominates (the web's phis), only phis of `W` and
//!   values of sites that make arrays in such blocks (the web's sites), at
//!   least one site in all; `W` is a maximal set of such phis joined by a
//!   web phi or a site they share or by one bringing another;
//! - no web phi nor site is on a cycle of the body that does not pass `H`;
//! - every value a phi of `W` or a web phi reaches stays inside the loop
//!   but for uses after it, uses as an entry of a web phi or of a phi of
//!   `W` are neither followed nor escapes, and pushes of a web phi itself
//!   are counted as below ("Pushed body phis"; before session 39 a web
//!   phi pushed was refused); every value a site reaches stays inside the
//!   function but for those uses and uses after the loop, and is not used
//!   in a block a run entering `H` may reach before the site runs again;
//! - it has at most 8 phis and sites (each edge compares every pair), and
//!   its header at most 64 candidate phis (the search joins them pairwise).
//!
//! Each phi of `W` and each site keeps a slot. On the edge from outside,
//! the slots are emptied, letting go of their arrays unless a web value is
//! used after the loop (then they stay, as a latch-owning phi's). On an
//! edge from a latch, with `n1..nm` the arrays the phis of `W` are entered
//! with: each slot (phis' and sites') lets go of its array unless it is
//! one of the `n`s; then the slot of phi `k` holds `nk` if some slot held
//! it and no phi before `k` is entered with it, and null otherwise; the
//! sites' slots are emptied. A normal return lets go of every slot unless
//! they may have left the loop. All let go alike: released when a phi of
//! `W` or a site is pushed as it is. A push of a site's array is tagged; a
//! push of a phi of `W` is tagged when its array is in one of the phis'
//! slots, and pushed as it is otherwise.
//!
//! Why that is sound. The slots hold distinct arrays (or null): a site's
//! array is new when it runs, a site runs at most once between two entries
//! of `H` and its slot is emptied at each, and of the phis entered with one
//! array only the first holds it. Each slot holds an array a site made
//! since `H` was entered from outside: so never an array a phi was entered
//! with from outside, which is alive while a phi holds it (its owner's
//! walk follows the phis of `W`), so has an address of its own. On a latch
//! edge, each `nk` is the array some phi of `W` had at the last entry of
//! `H` or that a site made in this iteration (a site entry of a web phi is
//! on an edge its site's block dominates, as for choosing phis): a slot
//! holds it exactly when a site of this run of the loop made it. So an
//! array held and entered with by no phi is one the phis no longer hold,
//! and every other value that may refer to it (values a phi of `W`, a web
//! phi or a site reaches) is defined again after the next entry of `H`
//! before any use, or not used before the site runs again (the arguments
//! of owning phis and sites); a use after the loop is reached from `H`'s
//! last entry only through the statement defining the value used. No
//! other owner lets go of these arrays: a site is claimed by one owner
//! only, and the phis of `W` are in no other owner's set. An array
//! entered with and in a slot moves to the first phi's slot entered with
//! it, so it is never let go of twice nor lost. A push of a phi holding
//! one of its slots' arrays is counted, and the slot's letting go is a
//! release; a phi holding an array it was entered with from outside
//! pushes it untagged, and that array's owner keeps it: the phis of `W`
//! are no entered phis nor chain phis, so any other walk meeting a push
//! of one ([`Walk::counts_push`]) takes it for an escape.
//!
//! *Pushed body phis.* A replay's recording loop whose `keep` is read in
//! the loop pushes the shadow `keep` has after the choice, a phi of the
//! body of its shadows' web, and such a web was refused, so each replay's
//! start shadows stayed. A push of a web phi `b` of the body holding
//! array `a` now pushes `a` tagged when a slot of the phis of `W` or of a
//! site holds it, and otherwise as a push of `W`'s phis words an array
//! they were entered with (below), or untagged; the web then releases.
//! Sound: `b` holds what a phi of `W` held at the last entry of `H` or
//! what a site made since (its entries are those or other web phis, on
//! edges a site's block dominates for a site's), so an array the web owns
//! that `b` holds is in a slot while `b` may be pushed (a site's slot is
//! emptied only on an edge into `H`, after which `b` is defined again
//! before any use), and is let go of only by a release, after the tape's
//! counted references.
//!
//! *Webs of one phi.* A replay's recording loop of a loop that takes a new
//! array on some iterations only carries the shadows in a phi whose latch
//! brings a body phi of itself and a fresh zero array, and pushes that
//! body phi (the shadow after the choice): no choosing phi, since a body
//! phi is pushed, and no sharing web of two, so every shadow it made (one
//! per iteration) stayed until the run's end. A header phi that no other
//! rule owns, whose latch brings at least one body phi, is now a sharing
//! web alone when it meets the rules above. The argument above holds for
//! `m = 1` as it is; with no body phi pushed the lowering does what a
//! choosing phi's does (a slot holds `n` exactly when a site made it).
//!
//! *Webs entered with pops.* A checkpoint's replay enters the loop around
//! its split with the snapshot's arrays as popped, and its recording loop
//! with fresh start shadows chosen by `select`s; when those loops' phis
//! form sharing webs, the popped arrays and the shadows reached a push of
//! a web's phi holding them, uncounted, so the pops were never dropped
//! and the shadows' sites never let go (a few arrays per replay). Now the
//! entries from outside of a sharing web's phis, followed back through
//! `select`s, that are pops or values of sites making arrays that are not
//! handed over (the web's *entries*; [`web_entries`]) are counted: the
//! walk of each entry takes every push of every phi of the web, and of
//! every `select` met, as a push of its own (any phi of the web may come
//! to hold any entry's array: `keep = r`). When the entry's walk then lets
//! go (a dropped pop, a released site), a push of such a value holding
//! the entry's array pushes that pop's word, or the array tagged
//! ([`Freed::web_entered`]); a web phi's own slot arrays are tagged as
//! before, and any other array is pushed untagged. Sound as for a
//! latch-owning phi entered with a pop or a site: every tape entry holding
//! the entry's array comes from a push its walk counted, each counting one
//! reference; the entry lets go only as a dropped pop or released site
//! does, at its next run or the return, after which no value of the
//! function that may hold its array is used before being defined again
//! (the walk's argument); the web's slots hold only its sites' arrays, so
//! the web never lets go of an entry's array. The comparison of addresses
//! names the array, since the entry's array stays alive while a phi or
//! `select` it reaches may be pushed.
//!
//! *Pushed selects.* A replay whose stretch holds a loop pushes each
//! carried array's start shadow as a `select` of a fresh zero array and
//! the shadow it was given (by whether a stretch came before), and
//! nothing else holds the fresh array: the push was an escape, so the
//! fresh array stayed until the run's end, one per replayed iteration of
//! the outer loop (`carry3` of tests/checkpoint/nested.irad: some 2 000
//! arrays at once at n = 32, where 18 suffice). Now a pushed `select` is
//! treated as a web's entry is above: followed back through `select`s to
//! the pops and sites making arrays (not handed over) it may hold
//! ([`pushed_selects`], into [`Freed::web_entered`]), whose walks take its
//! pushes as their own; a push of it holding such an array pushes that
//! pop's word or the array tagged, and any other array untagged. Sound as
//! for webs: every tape entry holding the entry's array comes from a push
//! its walk counted.
//!
//! *Entered with a web's phi.* A latch-owning phi `q` entered from outside
//! its loop with a phi `p` of a sharing web (a replay's recording loop,
//! entered with the array its split loop ends with) counts every push of
//! itself ([`Freed::web_phi_entered`]): holding the array it was entered
//! with, it pushes the word a push of `p` would push, which the web's
//! slots still say (they change only on the edges into the web's header,
//! and `q`'s loop is entered again from outside before any use of `q`
//! after such an edge); holding an array its latch brought, that array
//! tagged (as any latch-owning phi). The web's entries' walks take `q`'s
//! pushes as their own too.
//!
//! *Webs entered with a web's phis.* Without the optimiser a replay's
//! recording loop carries the primal arrays too, as a sharing web `W2`
//! entered from outside with the split loop's web `W`'s phis. A push of a
//! phi of `W2` holding an array it was entered with that way pushes what a
//! push of that phi of `W` would ([`Freed::web_webs`]; `W`'s slots are as
//! `W` left its loop, by the argument above), and `W`'s entries' walks
//! take `W2`'s pushes as their own. `W2` never lets go of what it is
//! entered with (its slots hold its sites' arrays only).
//!
//! *Webs leaving into a phi never pushed.* A sharing web whose arrays may
//! leave its loop lets go of nothing after it, so each replay kept the
//! last arrays its split loop held. When they leave only as a phi of the
//! web entering phis `q` from outside `q`'s loop (the web's other uses
//! after the loop keep no reference or push the web's phis), each a
//! latch-owning phi that is never pushed nor passed to be pushed
//! ([`Owner::quiet`]) or counts every push of itself (above), or a phi of
//! a sharing web (above), and each entered from outside with one of the
//! web's own phis (not a site or body phi of the web: a review found a
//! site's array, handed from an exit inside the loop to another web that
//! pushed it untagged, freed here) and keeping its arrays inside its loop,
//! the web lets go of its slots at a normal return
//! ([`webs_at_return`], released). Sound as "Leaving into a counting
//! phi": at the return no value of the function is used again, and every
//! tape entry holding a slot's array comes from a push of the web's phis
//! or sites (tagged) or of a `q` (counted or none); `q` never lets go of
//! the array it is entered with.
//!
//! *Choosing phis leaving into quiet ones.* The loop around a replay's
//! split, when its carried array is replaced on some iterations only, has
//! a choosing phi `p` whose last array goes on into the recording loop's
//! choosing phi `q` (entered with `p`), and `p` let go of nothing after its
//! loop: one copy per replay stayed until the run's end. A choosing phi
//! now lets go of its slots at a normal return, as a sharing web does
//! above, when its arrays leave only as `p` entering phis `q` that are
//! phis never pushed nor counting (above), phis of sharing webs (above), or
//! choosing phis entered with `p` whose arrays stay in their loop and that
//! are never pushed ([`Owner::quiet`]) or count every push of themselves
//! ([`Freed::entered`]: holding `p`'s array, which is no pop's, they push
//! it tagged), the latter only when `p`'s web releases. Sound as above:
//! `q`'s slot only ever holds its sites' arrays, its body phis are never
//! pushed (no choosing phi's are), and every push of `q` holding `p`'s
//! array is counted, so the release at the return frees that array only
//! after the tapes' references to it go.
//!
//! Fresh results. A function *returns a fresh array* at an array leaf of
//! its result (the result `[T]` itself, or a field `[T]` of a result tuple
//! at any depth of tuples inside it, named by its path of field indices,
//! when no field holds an array otherwise, as a dual does; [`Fresh`], in
//! [`Summaries`]) when on
//! every return that leaf holds an array made during the call, to which
//! no reference but the returned one and counted tape entries survives
//! the return, and which the function never lets go of. [`fresh`] checks:
//! - every value the leaf may be copied from at a return (back through
//!   phis, `select`, `tuple` and `getfield`) ends at an *origin*: the
//!   value of a site that makes arrays, or a fresh leaf of a call (a call
//!   site, below, or a field of a call's tuple returned as it is), never
//!   at anything else (a parameter, a pop, another call's result);
//! - from each origin, every value that may hold its array (forward
//!   through `tuple`, `getfield` of the array's own field only, `select`
//!   and every phi, tracking the field the array sits at) is only read,
//!   passed to a parameter its callee does not keep, returned with the
//!   array at this leaf (never at another, so that distinct fresh leaves
//!   come from disjoint origins, nor twice), or, for the value of a
//!   statement itself, pushed as it is; so may a call site's value
//!   (below; "Fresh results pushed on"). Everything else (function
//!   values, other primitives, duals) is an escape.
//!
//! A fresh leaf is *pushed* when one of its origins is pushed so, or is a
//! call's leaf its callee pushed. The summary is the greatest fixpoint
//! over the call graph: every array leaf starts fresh and never pushed,
//! and each round recomputes every function from the others until none
//! changes (a recursion returning an array made at its base is fresh).
//!
//! In a caller, `r = invoke @g(...)` of type `[T]` whose result is fresh,
//! and `f = getfield(t, k)` of a fresh field `k`, where `t = invoke
//! @g(...)` is in `f`'s block and every use of `t` is a `getfield`, those
//! of fields that can hold an array in that block (one of a field holding
//! no array takes no reference, wherever it is), the first of field `k`
//! being `f` (the later ones of field `k`, as in `t.0[0] + t.0[1]`, are
//! values `f` reaches), are *call sites*; so is the `getfield` taking a
//! fresh leaf deeper down by a chain of such `getfield`s in the block,
//! each tuple of the chain taken once (`t.0.1` of a fresh leaf `[0, 1]`).
//! Call sites are sites
//! that make arrays, to which every rule above applies (freed, released,
//! handed over to an owning phi, entering a latch-owning phi). A call
//! site whose callee may have pushed its array counts as pushed, so it
//! releases (and without counted tapes is not let go of). In a module
//! whose tapes are counted, every push of a statement's own array as it
//! is, and of a call site's value as it is ([`Freed::called`]), is
//! counted (tagged), whether or not the function lets go of it: its
//! caller may.
//!
//! *Fresh results pushed on.* Before session 44 only a statement's own
//! array could be pushed at a fresh leaf's origin, so a step returning
//! what a callee made and pushing it itself (reverse mode's forward sweep
//! of `leap2(p, v) { let r = leap(p, v); (r.0, dot(r.1, r.1), r.1) }`
//! pushes `r.1` for its pullback) returned no fresh leaf there, and a
//! loop of such steps kept every array that leaf held. A call site's
//! array is as new as a statement's (made during the callee's call,
//! which returned it), and its pushes are now counted as a statement's
//! are, so a call site's value pushed as it is counts as its origin's
//! push (the leaf pushed); the argument below holds unchanged.
//! Counting a push the function does not need counted never frees
//! early: a counted reference only delays the free, and one whose pop
//! never drops it keeps the array until the run's end (a leak, as before).
//! Since a function compiled while its module's tapes were not counted
//! tags nothing, a call site whose callee pushed is no site once the same
//! compiler has compiled any function so (a JIT deriving rules at run
//! time compiles the primals first); the flag is set before a module's
//! pieces are compiled and never unset, so a callee compiled later is
//! counted too.
//!
//! Why that is sound. By induction on the call tree of a finite run, each
//! call returns at a fresh leaf an array made during the call, to which
//! no reference survives but the returned one and counted tape entries.
//! The leaf holds one origin's array, since the backward rules are every
//! way a value comes to hold an array (module header). A statement's
//! array is new; a call leaf's was made during its callee's call (a
//! smaller tree, finished), so during this one. The forward rules follow
//! every copy of a reference within the function, and the uses admitted
//! end with the call (values die at the return), leave by this leaf only,
//! are pushes counted (tagged, below), or go to callees that keep
//! nothing. The callee never lets go of the array it returns: whatever it
//! lets go of is dead in it (the arguments above), and the return uses
//! the array. The fixpoint is the greatest, yet sound by this induction:
//! the calls whose results a run's return depends on form a finite tree,
//! and each step uses only the summary's equation. Compiled code is the
//! function after inlining, loop fusion and versioning, which copy and
//! move statements but keep what it returns and keep a push of a
//! statement's value a push of a statement's value, which every compiled
//! function of a counted module tags.
//!
//! In the caller, a `[T]` call site's value holds the new array as a
//! statement's would. A `getfield` call site runs exactly once after each
//! run of its call (the same block), and `t` is used by `getfield`s only,
//! those of field `k` the site and values it reaches (the other fields
//! hold other arrays), so again the array has one site run,
//! as a statement's has, and the argument for sites holds unchanged. On
//! tapes, every push of the array was counted (the callee's, above; the
//! caller's, as a released site's), and a site whose callee pushed
//! releases, so the array is freed once no tape entry or popped value
//! holds it. Since the callee never lets go of it and the caller's site
//! lets go of it once (handed over to one owner at most), it is freed
//! once.
//!
//! Either results. A loop replacing its array by what a call returns,
//! where the callee hands back its argument on some calls (written in
//! place) and returns a new array on others (`a = nudge_or_remake(a, h,
//! k)`), kept every array such calls made until the run's end: the result
//! is not fresh, and the header's phi, passed to a parameter its callee
//! keeps (returns), escapes. An array leaf of a function's result (as for
//! fresh leaves: the result `[T]`, or a `[T]` field of a result tuple at
//! any depth of tuples inside it, named by its path; before session 44,
//! only a field of the result tuple itself, so a reverse mode forward
//! sweep, whose result holds the primal's tuple in a tuple, had none)
//! *holds either* its parameter `j` of that type ([`Either`], in
//! [`Summaries`]) when
//! - every value the leaf may be copied from at a return (back through
//!   phis, `select`, `tuple` and `getfield`) ends at parameter `j`, at
//!   least once, or at an origin of a fresh leaf (a site making arrays, a
//!   call of a fresh `[T]` result), never at anything else (another
//!   parameter, a pop, a tuple's field a call returned);
//! - every value parameter `j` reaches (forward as for fresh leaves) is
//!   only read, passed to a parameter its callee does not keep, returned
//!   at this leaf (never at another), or, `j` itself, pushed as it is:
//!   then `j` is *pushed*, which only arrays of 8-byte elements may be
//!   (their addresses are even wherever they come from);
//! - every origin's array reaches nothing that escapes but the return at
//!   this leaf (the forward rules of fresh leaves); one pushed as it is,
//!   counted, makes the leaf's origins pushed;
//! - the leaf is not fresh (a fresh call is a call site, above), and no
//!   other leaf holds parameter `j`.
//!
//! Such a leaf is computed for each function once its callees' kept
//! parameters and fresh leaves are settled (so a function returning
//! another either function's result holds neither). A reverse mode
//! forward sweep of such a function is one too: it returns the array and
//! its shadow, each its parameter as passed or a new one, and pushes both
//! parameters as they are. In a module whose tapes are counted, a
//! function clears the bit of the word it is passed for a pushed
//! parameter `j` and counts each push of it when tagged, exactly as for a
//! pushed parameter (below, [`Summaries::masked_params`]), so that a
//! caller may pass it tagged.
//!
//! So, after a call of `@f` passing the array `X` at `j`, by the
//! induction of fresh results, the leaf's value `v` either has `X`'s
//! address, and then is `X` and the call made no array that outlives it
//! at this leaf, or holds an array made during the call to which no
//! reference survives but `v`'s and counted tape entries (a new array
//! cannot have `X`'s address: `X` is alive throughout the call, and no
//! function lets go of its parameters); then the callee keeps nothing of
//! `X` but tape entries of pushes of the word it was passed (it keeps `j`
//! only by returning it at this leaf, which it did not, and by those
//! pushes).
//!
//! In a caller, the *either call sites* are `v = invoke @f(..)` of an
//! either `[T]` result and `v = getfield(t, k)` of an either field `k`
//! where `t = invoke @f(..)` is in `v`'s block, used only by `getfield`s
//! there, `v` the only one of field `k`; and the `getfield` taking an
//! either leaf deeper down by a chain of such `getfield`s in the block,
//! as for call sites of fresh leaves. A phi `p` of type `[T]` of header
//! `H` is an *either phi* ([`either_owning`]) when
//! - `H` has exactly one predecessor it does not dominate (the loop's
//!   entry), with a value `e` that is no latch entry;
//! - every latch entry is such a `v` whose call passes `p` itself at `j`,
//!   in the loop's body;
//! - every value `p` reaches stays inside the loop but for uses after it
//!   (as for a latch-owning phi), the calls' passing of `p` at `j` neither
//!   followed nor an escape (`p` passed at any other kept parameter, the
//!   other field's included, is one);
//! - each `v` is handed over to `p` as a site to a latch-owning phi (no
//!   value it reaches escapes but through `p`, nor is used where a run
//!   entering `H` may go before its call runs again; `p` does not take it
//!   from there), is an operand of no other phi in the loop (one after
//!   it, an exit phi, is a use after the loop: below), and its uses after
//!   the loop count as `p`'s; a push of `v` as it is (or passing it to a
//!   pushed parameter) counts a reference only when `v` is not `e`'s
//!   array (`v` may be `e`, handed back, perhaps no array of the arena;
//!   [`Freed::either_results`]), and makes `p` release;
//! - when a call's parameter `j` is pushed, tags may be passed (the
//!   module's tapes counted, nothing compiled uncounted, as for pushed
//!   parameters): the call then counts as a push of `p` as it is, `p` is
//!   passed as the word such a push pushes (tagged while `p != e`,
//!   [`tagged_args`]), and `p` releases.
//!
//! It is a latch-owning phi ([`Freed::latch`], [`Freed::either`]) with a
//! slot holding `p`'s array when a call of the loop made it, null while
//! `p` holds `e`'s. Entered with `p == e` (from outside, or from a latch
//! whose call handed `e` back), the slot is emptied, letting go of its
//! array when nothing reaches outside the loop (as a latch-owning phi's);
//! entered with `p != e` (from a latch), nothing happens when the slot
//! holds `p`'s array (the call handed it back), else the slot lets go of
//! its array and holds `p`'s. A normal return does as for a latch-owning
//! phi. `p` releases when it or a `v` is pushed as it is (counted when
//! it is not `e`, as a latch-owning phi's pushes), passed to a pushed
//! parameter, or a callee may have pushed what it made (counted there),
//! else frees. No
//! site takes `p`'s pushes as its own (it is no entered phi), nor does a
//! phi it enters.
//!
//! Why that is sound. First, `e`'s array is alive while the loop runs and
//! is never let go of here: every value reaching `p` meets the calls'
//! passing of `p` to a kept parameter (an escape for every walk but
//! `p`'s own), so no site, pop or owning phi whose array may be `e`'s
//! lets go of it; an outer either phi reaching `p` sees the inner calls
//! as escapes. By induction over the entries of `H`, the slot holds `p`'s
//! array when `p != e`, and that array was made for `p`'s leaf by a call
//! of this run of the loop; null when `p == e`. An entry from outside
//! gives `p == e`, the slot null. An entry from a latch brings `v`, the
//! leaf of a call passed `p`'s previous array `Y` at `j`: if the call
//! handed `Y` back, `p`'s array is unchanged and so is the slot, which
//! holds `Y` or (when `Y` is `e`'s) null, where `p == e` empties it again.
//! Otherwise `v` is new, so not `e`'s (alive) nor the slot's (alive until
//! let go): `p != e`, the slot differs from `p`, and it holds `Y` when a
//! call made `Y`, null when `Y` is `e`'s. That `Y` is dead when let go of,
//! but for counted tape entries: values `p` reaches are defined again
//! after the entry of `H` before any use (the argument for sites, with the
//! entry of `H` as the statement); values a `v` reaches are not used
//! before its call runs again (handed over), and after the loop only as
//! `p`'s; the callee kept nothing of `Y` but its pushes of the word it was
//! passed, tagged since `p` held `Y != e` (counted); the caller's tape
//! entries holding `Y` come from pushes of `p` or of a `v` holding it,
//! tagged too, since `Y != e`. Another leaf of the same call never holds
//! `Y`: its arrays are those made for it and its own parameter's, and `p`
//! is passed at `j` only. No other owner lets go of `Y`: the callee never
//! lets go of what it returns, `v` enters no other phi, and no site of
//! this function made it. It is let go of once: the slot holds it until
//! then, and no call returns it again (it is `p`'s no more). Released, it
//! is freed once the pops have let go of every counted entry. The same
//! for the slot emptied on an entry from outside or at the return when
//! nothing reaches outside the loop (as for a latch-owning phi): `p`'s
//! last array is dead then. A function compiled is the one summarised
//! after inlining, fusion and versioning, which keep what it returns and
//! a push of a parameter a push of it (as for fresh results and pushed
//! parameters).
//!
//! *Through either calls.* Every value reaching an either phi's entry
//! `e` met the calls' passing of the phi, an escape, so `e`'s array was
//! never let go of: the copy a replay starts from, the arrays its split
//! hands on and its start shadow stayed until the run ended, three per
//! replay of a checkpointed loop of such calls (docs/performance.md). A
//! site's walk (of a site, an owning phi, a pop) now follows a value `v`
//! passed to the parameter `j` an either callee may return to that
//! call's leaf ([`Walk::either_passes`]), instead of stopping there: the
//! callee keeps `j` only by returning it at that leaf (no other leaf
//! holds it; the call's tuple is used only by `getfield`s, the leaf the
//! only one of its field) and, when it pushes `j`, by pushes of the word
//! it is passed. Such a push counts as a push of `v`, admitted where a
//! push of `v` is (`counts_push`) and tags are passed, and the argument
//! is passed as the word a push of `v` would push ([`tagged_args`],
//! every either call pushing its parameter being in [`Freed::passed`]).
//! Parameters' walks (the summaries) are unchanged.
//!
//! Why that is sound. Seen from the caller, the call is then a copy of
//! `v` into the leaf, or nothing (a new array at the leaf, which the
//! caller's walk follows needlessly), plus counted pushes: the rules above
//! treat it as a `select` and pushes, and the argument for sites holds
//! unchanged. It does not touch an either phi `p` entered with the site's
//! array `X`: `p`'s slot is null while `p` holds `X` and only ever holds
//! arrays its calls made, never `X`, which is alive while they run; `X`
//! is let go of only when no value the walk reached can be used again,
//! `p`, its calls' leaves and the comparison `p == e` included (they are
//! values the walk reached, or `e`, which it reached too).
//!
//! *Handed back by a call.* An either leaf may hold nothing but its
//! parameter ([`Either::only_param`]: no origin of a fresh leaf reaches
//! it), the callee writing the array it is given and handing it back
//! (`a = nudge(copy(a), h)`, or a forward sweep handing back the arrays
//! and shadows it is given). A phi none of whose rules applied to such a
//! leaf, passed a site `s` of the loop (a copy made in every iteration),
//! owned nothing, and each iteration's copy stayed until the run ended.
//! An owning or latch-owning phi now takes such a leaf as the site `s`
//! passed there ([`Walk::handed_back`], `made`): `s` is handed over to
//! it as if it entered the phi itself, `s`'s walk following the call to
//! its leaf ([`Walk::either_passes`], above) and the phi's statement
//! being the one not followed, and `hand_over`'s check that `s` is not
//! carried into the phi again before it runs again counts an entry
//! holding the leaf as one holding `s`. Sound as for sites handed over:
//! the leaf is `s`'s array on every return (by the induction of either
//! results, with no array made at the leaf), so the phi's entry holds
//! `s`'s array and nothing else, as when `s` enters it, and the callee
//! keeps nothing of it but counted pushes of the word it was passed.
//!
//! *Entered with made arrays.* A pushed parameter's word is tagged only
//! when the argument's pushes are counted, and an either phi counts a
//! push of itself only when it holds an array of its own. A phi shaped
//! as an either phi (entered from one block outside its loop with `e`,
//! every latch entry the leaf of an either call passed the phi at `j`)
//! whose `e` holds only arrays that sites of the function made (`e` is
//! such a site's value, or a phi each entry of which is such a value,
//! down to sites: [`made_only`]) *counts* every push of itself
//! ([`Freed::counting`]), in a module passing tags: each push of it, and
//! each passing of it to a parameter its callee pushes, is the tagged
//! word whatever array it holds (all of the run's arena: its entry's, or
//! one its calls made). So a walk reaching it counts its pushes as its own
//! (`counts_push`). Tagging more never frees early: a counted reference
//! only delays the free of an array whose maker releases it, and a maker
//! whose walk reached the phi releases (it met the pushes), while one
//! whose walk did not reach it never lets go of the array (its walk
//! stopped at an escape, or the array left its loop: a latch-owning phi
//! lets go after that only at the return, releasing). The phi need not
//! be an either phi itself: when it is not, what its calls made is kept,
//! and tagged pushes of it only count references that are never dropped
//! to a free. The leaves of the calls its latches bring count every push
//! of themselves too (since session 43): such a leaf holds the array the
//! phi held, handed back, or one the call made (of the arena, as the
//! callee's sites make theirs), so the same argument holds. Before, a
//! push of a leaf holding `e`'s array was untagged (as for an either
//! phi's results, above), an escape for the walk of the site `e` holds:
//! a replay's recording that pushes the shadow a call returned (for a
//! read after the call) kept its start shadow until the run ended.
//!
//! *Entered with parameters too* (session 46). A replay's recording loop
//! is entered with start shadows chosen by `select`s of a fresh zero array
//! and the shadow the replay was given (a parameter), and, when it keeps
//! its last arrays (`p = c; c = either(c)`), has a phi handed the either
//! phi's array from every latch. Neither counted, so the fresh shadows
//! stayed until the run ended, one per replay. Now `e` may also hold the
//! function's parameters' arrays, through phis and `select`s (`made_only`
//! lists them), and a phi entered so whose every latch entry counts counts
//! too (it holds its entry's array or one a counting phi held); each push
//! of such a phi is tagged unless it holds one of those parameters'
//! arrays, compared by address (a parameter's array is alive throughout
//! the call, so no array of the arena has its address meanwhile), and
//! pushed untagged then. This rule comes first in the lowering of a push:
//! every walk reaching such a phi took its pushes as counted, whatever
//! other rule the phi meets. The argument above holds: only arrays of the
//! arena are tagged, each tagged push counting one reference.
//!
//! A replay of a checkpointed loop of either calls starts from a copy of
//! the snapshot (`s = copy(..)`), handed to the phi of its split loop with
//! the copies each advance ends with, and enters the either phis of its
//! advances and recording with that phi, and its recording's shadow phi
//! with a fresh zero array `z`: those phis count, the split's phi and `s`
//! follow them and own their arrays (released, freed once the pullback
//! has popped the pushes of the recording's forward sweeps), and `z` is
//! released at the replay's return.
//!
//! *Exit phis of either phis.* The values `p` and the `v`s reach may leave
//! the loop by entering phis after it: `a = f(a); if done { break; }`,
//! whose phi after the loop takes `v` on the `break` and `p` on the normal
//! exit; or the phi bounds-check versioning puts after the two copies of a
//! loop. Such a use is a use after the loop ([`Leaving::into`]), so `p`'s
//! last array may go on and is not let go of after the loop.
//! [`Walk::read_after`] follows those phis, and the phis they enter,
//! outside the loop. When every use of them keeps no reference (an
//! element read, a copy's source, a parameter its callee does not keep),
//! the arrays are dead at the return, where `p` lets go of its slot
//! ([`Freed::at_return`]). When moreover no such use, nor an edge carrying
//! a followed value into a followed phi, is in a block a run entering `H`
//! may reach before that phi's block runs again ([`unrepeated`]), they are
//! dead at the next entry of `H` as well, and the slot is let go of on
//! entries from outside, as when nothing leaves. Otherwise nothing is let
//! go of after the loop (as before).
//!
//! Why that is sound. On a `break` the exit phi takes `v`: `Y` handed
//! back, which the slot may hold; a new array `Z`, made in the iteration
//! that left, which never entered `p` (no latch entry followed the call),
//! so that no slot holds it and nothing lets go of it (one per run of the
//! loop, as for a site's exit phi); or `e`'s, never in the slot. After
//! the loop the slot is let go of only on an entry from outside or at the
//! return (a latch entry needs an entry from outside first). At the
//! return no value is used again: the followed values took no reference
//! that outlives their statements, and pushes of `p` and the `v`s are
//! counted. On an entry from outside, every path from that entry of `H`
//! to a use of a followed value defined in block `X` passes `X` (no use is
//! in a block reachable from `H` without entering `X`), so the use sees a
//! value defined since, from the arrays of this run of the loop or later;
//! and a followed phi takes a followed value only on edges that also come
//! after its definition ran again, so it holds no old array either (by
//! induction over the followed phis). This holds for a phi after the loop
//! that its header dominates (settle's) and for the phi after the two
//! copies of a versioned loop, which every path out of either copy
//! passes. An outer loop's phi may hold the array past the next entry,
//! read after the inner loop ran again (`held_over` of
//! tests/free_arrays/either_exits.irad, a use after free if let go of
//! then): let go of at the return only. A followed value used in the loop
//! again (carried back in by an outer loop) is refused. No other owner lets go of these
//! arrays: a phi taking `p` or `v` has an entry that is no site, so it is
//! no owning, latch-owning or choosing phi's site nor a handing chain's
//! head's, and the followed values go only to uses that keep nothing.
//!
//! Pushed parameters. A function that pushes its parameter cannot count
//! the tape's reference itself: the parameter may be no array of the
//! arena (a JIT argument, an object's caller's buffer), whose header it
//! must not touch. So it kept the parameter, and a caller's site passing
//! its array to it was never let go of: reverse mode's forward sweep of a
//! step function pushes the state it is given, and a checkpoint's replay
//! calling it per iteration kept every array it made. The caller knows
//! what it passes, so it says so in the low bit of the address (the
//! tapes' tag). A parameter of type `[f64]` or `[i64]` (whose addresses
//! are even wherever they come from; a C caller's `[bool]` buffer may
//! not be) is *pushed* ([`Summaries::pushes`])
//! when every value it reaches (every phi counting, as for kept
//! parameters) stays inside the function but for pushes of the
//! parameter itself as it is (`push(%a)`, not of a `select` or phi of
//! it) and passings of it as it is to a parameter its callee only pushes
//! (the function itself included): it is not returned, nor passed
//! through a function value or to any other parameter its callee keeps.
//! It is computed once its callees' kept parameters are settled, as a
//! greatest fixpoint over the functions summarised together: every
//! `[f64]` and `[i64]` parameter starts pushed, and each round
//! recomputes every function from the others until none changes
//! (`Summaries::settle_pushed`).
//!
//! *Pushed parameters passed on.* Before session 44 passing a parameter
//! on to a pushed one was keeping it, so a function handing the shadow it
//! is given to a callee's forward sweep (reverse mode's forward sweep of
//! a step calling another step, or of a recursive step, which passes it
//! on to itself) kept it: the caller's shadow phi owned nothing, and
//! each replay of a checkpointed loop of such calls kept every shadow it
//! made until the run ended. Now the lowering passes the word the
//! function was given, as it was given, to such a callee's parameter
//! (`Lower::param_words`): a push of it there is a push of the word the
//! function itself would push, counted when it is tagged. In a module whose tapes are counted, such a
//! function clears the bit of the word it is passed at entry, so every
//! use sees the address, and each push of the parameter pushes the word
//! it was passed, counting one reference (`irad_rt_hold`) when it is
//! tagged. A caller, in such a module, treats passing `v` to a pushed
//! parameter of an `invoke`d callee as a push of `v` as it is: its walks
//! ([`Walk::invoke_pushes`]) admit it where they admit a push of `v`,
//! and the lowering passes the word that push would push
//! ([`tagged_args`]: a released site's array tagged, a latch-owning
//! phi's tagged when it holds its own, a dropped pop's word); any other
//! argument, and every argument of a function value, an object's entry
//! or the JIT, is passed untagged. Tags are passed only when every
//! function the compiler has compiled was compiled counted
//! (`Summaries::uncounted`, as for fresh results): the flag is set before
//! a module's pieces are compiled and never unset, so the callee,
//! compiled before or after, clears the bit. Without counted tapes
//! nothing changes: no function masks, and passing to a pushed parameter
//! keeps as before.
//!
//! Why that is sound. Seen from the caller, the call is a number of
//! pushes of the word it passes, made while the call runs, and nothing
//! else that outlives it (the callee keeps the parameter only by those
//! pushes, and its result holds no reference to it, which would be
//! returning it): each push is counted when the word is tagged, as the
//! caller's own push of `v` would be. The hold is made inside the call,
//! before the call returns, so before the caller's site (or phi, or pop)
//! can let go of the array: that happens at its next run, an entry of its
//! phi's block or the return, all after the call, and a use of `v` by the
//! call is a use like any other for the arguments above. An untagged word
//! is the address itself: the callee pushes it untagged, never looks at
//! its header, and the caller, which passed it so, did not count on the
//! push: it keeps the array (a site whose walk met such a call is not let
//! go of; a latch-owning phi passes untagged only the array it was
//! entered with, which it never lets go of, as for its pushes). A tagged
//! word reaches only a function that clears the bit, by
//! the flag's rule above; the bit is the one tapes use, and pops clear it
//! (in a counted module). Compiled code is the function after inlining,
//! fusion and versioning: these copy a push of the parameter as a push of
//! the parameter, and an inlined callee that pushes its own parameter
//! makes the caller's parameter kept, not pushed (above), so the compiled
//! body pushes the parameter only as the summary says (debug builds check
//! it, [`still_only_pushed`]). A parameter passed on to one its callee
//! only pushes is, seen from the caller, pushed by the callee's pushes of
//! the very word the caller passed (the function passes on the word it
//! was given, and the callee clears the bit and counts as above: a
//! tagged word reaching the function reaches the callee by the same
//! flag's rule). The greatest fixpoint is sound by induction on a finite
//! run's call tree: the calls a call makes finish first, and each keeps
//! the word only by its own counted pushes or by such calls, so a
//! recursion that passes the parameter down keeps it only by the pushes
//! made at its end.
//!
//! What is left are the tapes. An array a freed site made was never on
//! one. One a released site made leaves its function only by pushes of
//! `a` itself, each a tagged word counting one reference; a tape entry
//! that holds it is such a word, or a copy of one pushed again by a
//! dropped pop (counted again), since every other push of an array that
//! may be it (one a value reaches, a parameter, a pop's value not pushed
//! as it is) makes its site, the pop or the caller's site, not let go,
//! unless it is a pushed parameter's push of the tagged word its caller
//! passed (counted, "Pushed parameters").
//! A pop hands its entry's reference to its value: a dropped pop counts
//! it down only once nothing can use the value (the argument above); any
//! other pop never counts it down, so the array then stays (a leak, never
//! a use after free). Hence while any tape entry or popped value may still
//! refer to the array, its count is above zero, and while its maker may
//! still use it, it is not given up: the free comes after the last use.
//! Untagged words are never counted nor looked at, so arrays from outside
//! the arena (an object's caller's) are safe to pop and drop.
//!
//! The same holds in every function compiled: primal, forward rules
//! (whose duals of arrays are tuples of arrays, `dual`/`primal`/`tangent`
//! above), reverse mode's sweep and pullback, checkpoints' replays, and the
//! functions the JIT derives at run time: the count lives with the array,
//! not with the function that pushed it, so a pop in another function
//! (the pullback, a replay) lets go of it just as well. Arguments are never
//! freed here, nor call results but fresh ones (above). Assumes a verified
//! function (SSA dominance); statements in unreachable blocks never run
//! and are ignored.
//!
//! Summaries of inlined bodies. A callee is summarised (kept, pushed,
//! fresh and either leaves) as code generation compiles it: with its own
//! small callees inlined ([`Summaries::inline`], the compiler's limits),
//! which is the body its caller's call runs. Before session 43 it was
//! summarised as the module has it, so a step function returning what a
//! small helper returns (`if k % 4 == 1 { copy.. } else { nudge(a, h) }`,
//! the helper handing its argument back) held neither, its own call
//! (`nudge(a, h)`) being an unknown source: a loop of such steps owned
//! nothing its calls made, and under a tape limit each replay kept every
//! array and shadow its recording's calls made, more memory than without
//! a limit (`mixed_steps` of tests/checkpoint/by_calls.irad; docs/
//! performance.md). Inlining copies the callee's statements with their
//! effects, so what the summary says of the inlined body holds of the
//! call, and is what the body compiled for the function does (the
//! `debug_assert` of `mask_pushed_params` checks the pushed parameters
//! against the body after fusion and versioning too).

use irad_ir::flow::{ControlFlowGraph, DominatorTree};
use irad_ir::types::{Scalar, Type};
use irad_ir::{Block, Func, FuncId, Inst, InstKind, Module, Operand, Prim, Terminator, Value};
use rustc_hash::FxHashMap as HashMap;
use rustc_hash::FxHashSet as HashSet;

mod fresh;
mod sharing;

pub(super) use fresh::{Either, Fresh};

/// How many (value, use) steps the analysis of one function may take; a
/// function needing more (never seen) frees only the sites found so far.
const BUDGET: usize = 1 << 20;

/// The most functions one computation of [`Summaries`] looks at, and the
/// most rounds it takes to settle; beyond either, the functions it was
/// computing keep every parameter (never seen).
const SUMMARY_FUNCS: usize = 4096;
const SUMMARY_ROUNDS: usize = 64;

/// For each function of the module summarised so far, for each parameter,
/// whether the function may keep a reference to (an array in) it beyond
/// the call: return it, push it, or pass it where it may be kept; and for
/// each array leaf of its result, whether it is fresh (module header,
/// "Fresh results").
///
/// A function's body never changes once it is in the module (rules derived
/// at run time add functions), so a summary stays true.
#[derive(Default)]
pub(super) struct Summaries {
    kept: HashMap<FuncId, Vec<bool>>,
    /// By function, for each parameter: whether the function keeps it
    /// only by pushing it as it is (`push(%param)`), never returning it,
    /// pushing it otherwise or passing it where it may be kept (module
    /// header, "Pushed parameters"). A parameter pushed so is also kept.
    pushed: HashMap<FuncId, Vec<bool>>,
    /// By function, by array leaf of its result (a path of field indices,
    /// empty for a `[T]` result); a function or leaf not there is not
    /// fresh.
    fresh: HashMap<FuncId, fresh::FreshLeaves>,
    /// By function, the array leaves of its result (by path, as `fresh`)
    /// that hold either an array made during the call or one of its
    /// parameters as passed ("Either results"); a function or leaf not
    /// there does not.
    either: HashMap<FuncId, Vec<(fresh::Path, Either)>>,
    /// Whether a function was compiled (its sites found) while its module's
    /// tapes were not counted: its pushes of its own arrays are not tagged,
    /// so no caller may release an array a callee pushed (a JIT deriving
    /// rules at run time compiles primals first, uncounted).
    uncounted: bool,
    /// The limits code generation inlines small callees by (`Some(None)`:
    /// it does not), pinned at the first function compiled ([`pin_inline`],
    /// `None` before): a function is summarised with its small callees
    /// inlined, as it is compiled ("Summaries of inlined bodies"), so every
    /// function is compiled with the limits its summary was made with.
    ///
    /// [`pin_inline`]: Summaries::pin_inline
    inline: Option<Option<irad_passes::pe::Limits>>,
    /// The module's recursive functions, for `inline`, with the module's
    /// length they were found at (rules derived at run time add functions).
    recursive: Option<(usize, irad_ir::entity::EntitySet<FuncId>)>,
}

/// The functions being summarised, each as code generation compiles it:
/// with its small callees inlined when that inlines any call, else as the
/// module has it.
struct Bodies<'m> {
    module: &'m Module,
    bodies: HashMap<FuncId, Func>,
}

impl Bodies<'_> {
    fn get(&self, g: FuncId) -> Option<&Func> {
        self.bodies.get(&g).or_else(|| self.module.get(g))
    }
}

/// How a function lets go of the arrays of one of its sites.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub(super) enum Letgo {
    /// A site no tape ever holds an array of: `irad_rt_free`.
    Free,
    /// A site whose arrays may be pushed: `irad_rt_release` frees one now
    /// if no tape holds it, else at the drop of its last pop.
    Release,
    /// A `pop` of an array: `irad_rt_drop_popped` gives up the reference
    /// the pop took from the tape.
    Drop,
}

impl Summaries {
    /// Whether `callee` may keep its parameter `k` (unknown: yes).
    fn keeps(&self, callee: FuncId, k: usize) -> bool {
        self.kept
            .get(&callee)
            .and_then(|ks| ks.get(k).copied())
            .unwrap_or(true)
    }

    /// Whether `callee` keeps its parameter `k` only by pushing it as it
    /// is (unknown: no).
    pub(super) fn pushes(&self, callee: FuncId, k: usize) -> bool {
        self.pushed
            .get(&callee)
            .and_then(|ps| ps.get(k).copied())
            .unwrap_or(false)
    }

    /// The parameters of `f` it keeps only by pushing them as they are,
    /// each `true` at its position (module header, "Pushed parameters").
    pub(super) fn pushed_params(&mut self, module: &Module, f: FuncId) -> Vec<bool> {
        self.ensure(module, &[f]);
        self.pushed.get(&f).cloned().unwrap_or_default()
    }

    /// Whether the array leaf at `path` of `callee`'s result (`[]` for a
    /// `[T]` result, `[k]` for field `k` of a tuple's, `[k, j]` for field
    /// `j` of its field `k`, ...) is fresh (unknown: no).
    fn fresh(&self, callee: FuncId, path: &[usize]) -> Fresh {
        self.fresh
            .get(&callee)
            .and_then(|f| f.iter().find(|(p, _)| p.as_slice() == path))
            .map_or(Fresh::No, |&(_, f)| f)
    }

    /// Whether the array leaf at `path` of `callee`'s result (as for
    /// [`Summaries::fresh`]) holds either an array made during the call
    /// or its parameter [`Either::param`] (unknown: no).
    fn either(&self, callee: FuncId, path: &[usize]) -> Option<Either> {
        self.either
            .get(&callee)
            .and_then(|e| e.iter().find(|(p, _)| p.as_slice() == path))
            .map(|&(_, e)| e)
    }

    /// The parameters of `f` whose words it clears at entry in a module
    /// whose tapes are counted, each `true` at its position: those it only
    /// pushes as they are ("Pushed parameters") and those it pushes so and
    /// may return at an either leaf ("Either results").
    pub(super) fn masked_params(&mut self, module: &Module, f: FuncId) -> Vec<bool> {
        let mut out = self.pushed_params(module, f);
        for (_, e) in self.either.get(&f).into_iter().flatten() {
            if e.param_pushed
                && let Some(m) = out.get_mut(e.param)
            {
                *m = true;
            }
        }
        out
    }

    /// Summarises every function `roots` call, directly or not, that is not
    /// summarised yet: starting from "keeps nothing", each round recomputes
    /// every one from the others' current summaries until none changes (the
    /// least set of kept parameters: a parameter passed around a recursion
    /// and never further is not kept).
    fn ensure(&mut self, module: &Module, roots: &[FuncId]) {
        let mut new: Vec<FuncId> = Vec::new();
        let mut seen: HashSet<FuncId> = HashSet::default();
        let mut work: Vec<FuncId> = roots.to_vec();
        let mut bodies: HashMap<FuncId, Func> = HashMap::default();
        while let Some(g) = work.pop() {
            if self.kept.contains_key(&g) || !seen.insert(g) {
                continue;
            }
            if module.get(g).is_none() {
                continue;
            }
            if let Some(inlined) = self.inlined(module, g) {
                bodies.insert(g, inlined);
            }
            new.push(g);
            if let Some(func) = bodies.get(&g).or_else(|| module.get(g)) {
                work.extend(callees(func));
            }
        }
        if new.is_empty() {
            return;
        }
        let bodies = Bodies { module, bodies };
        self.settle(&bodies, &new);
    }

    /// `g` with its small callees inlined as code generation inlines them
    /// (`Compiler::inlined`), when that inlines any call.
    fn inlined(&mut self, module: &Module, g: FuncId) -> Option<Func> {
        let limits = self.inline.clone().flatten()?;
        super::inlined_with(module, g, &limits, &mut self.recursive).map(|i| i.func)
    }

    /// The limits every function is compiled and summarised with: `wanted`
    /// (the compiler's) the first time, the same ever after, whatever the
    /// compiler is later set to (a summary of a callee compiled before
    /// must stay true of the body compiled for it).
    pub(super) fn pin_inline(
        &mut self,
        wanted: &Option<irad_passes::pe::Limits>,
    ) -> Option<irad_passes::pe::Limits> {
        self.inline.get_or_insert_with(|| wanted.clone()).clone()
    }

    /// Summarises the functions `new` (every callee of theirs summarised or
    /// among them), of `bodies`.
    fn settle(&mut self, bodies: &Bodies<'_>, new: &[FuncId]) {
        let all_kept = |g: FuncId| vec![true; bodies.get(g).map_or(0, |f| f.params.len())];
        if new.len() > SUMMARY_FUNCS {
            for &g in new {
                self.kept.insert(g, all_kept(g));
            }
            return;
        }
        for &g in new {
            let n = bodies.get(g).map_or(0, |f| f.params.len());
            self.kept.insert(g, vec![false; n]);
        }
        if !self.fixpoint(bodies, new, |s| &mut s.kept, kept_params) {
            for &g in new {
                self.kept.insert(g, all_kept(g));
            }
            return;
        }
        self.settle_pushed(bodies, new);
        self.ensure_fresh(bodies, new);
        for &g in new {
            if let Some(func) = bodies.get(g) {
                let either = fresh::either(func, self);
                if !either.is_empty() {
                    self.either.insert(g, either);
                }
            }
        }
    }

    /// Recomputes the summary `of` of every function of `new` by `step`
    /// from the current summaries, round after round, until none changes:
    /// `true` if so within the rounds allowed.
    fn fixpoint<T: PartialEq>(
        &mut self,
        bodies: &Bodies<'_>,
        new: &[FuncId],
        of: fn(&mut Summaries) -> &mut HashMap<FuncId, T>,
        step: fn(&Func, &Summaries) -> T,
    ) -> bool {
        for _ in 0..SUMMARY_ROUNDS {
            let mut changed = false;
            for &g in new {
                let Some(func) = bodies.get(g) else { continue };
                let next = step(func, self);
                let summary = of(self);
                if summary.get(&g) != Some(&next) {
                    summary.insert(g, next);
                    changed = true;
                }
            }
            if !changed {
                return true;
            }
        }
        false
    }

    /// Summarises which parameters of the functions `new` (whose kept
    /// parameters are summarised, as are all their callees') they only
    /// push as they are: starting from "every `[f64]` and `[i64]`
    /// parameter pushed", each round recomputes every one from the
    /// others' current summaries until none changes (the greatest such
    /// summary: a parameter passed on to a pushed parameter of a callee,
    /// the function itself included, is pushed when that one is). Each
    /// round can only take parameters away, so it settles; past the rounds
    /// allowed, none is pushed.
    fn settle_pushed(&mut self, bodies: &Bodies<'_>, new: &[FuncId]) {
        for &g in new {
            if let Some(func) = bodies.get(g) {
                let all = func
                    .params
                    .iter()
                    .map(|&p| taggable(func.values.get(p).map(|d| &d.ty)))
                    .collect();
                self.pushed.insert(g, all);
            }
        }
        if !self.fixpoint(bodies, new, |s| &mut s.pushed, pushed_params) {
            for g in new {
                self.pushed.remove(g);
            }
        }
    }

    /// Summarises which result leaves of the functions `new` (whose kept
    /// parameters are summarised, as are all their callees') are fresh:
    /// starting from "every array leaf fresh, never pushed", each round
    /// recomputes every one from the others' current summaries until none
    /// changes (the greatest such summary: a leaf made afresh at the end
    /// of a recursion is fresh). Each round can only take freshness away
    /// or add pushes, so it settles; past the rounds allowed, none is
    /// fresh (never seen).
    fn ensure_fresh(&mut self, bodies: &Bodies<'_>, new: &[FuncId]) {
        for &g in new {
            if let Some(func) = bodies.get(g) {
                self.fresh.insert(g, fresh::top(func));
            }
        }
        if !self.fixpoint(bodies, new, |s| &mut s.fresh, fresh::fresh_leaves) {
            for g in new {
                self.fresh.remove(g);
            }
        }
    }
}

/// What a function lets go of itself (module header): its sites, in
/// statement order of the layout, then its owning phis, each with how; and
/// the sites whose arrays an owning phi lets go of instead (*handed
/// over*), with the phi's way (their pushes are counted when it releases).
pub(super) struct Freed {
    pub(super) sites: Vec<(Value, Letgo)>,
    pub(super) handed: Vec<(Value, Letgo)>,
    /// The latch-owning phis among `sites`, each with the operand it is
    /// entered with from outside its loop and whether its arrays may leave
    /// the loop ("Latch-owning phis").
    pub(super) latch: Vec<(Value, (Operand, bool))>,
    /// The latch-owning phis among `latch` whose latches bring what calls of
    /// either functions return when passed the phi ("Either results"): on
    /// an entry from a latch the phi lets go of its slot's array only when
    /// the call returned another.
    pub(super) either: HashSet<Value>,
    /// The calls' results handed over to the phis of `either`, each with
    /// its phi: a push of one as it is counts a reference only when it
    /// holds an array other than the one the phi was entered with (which
    /// the call may have handed back), as a push of the phi does.
    pub(super) either_results: HashMap<Value, Value>,
    /// The latch-owning phis among `latch` entered with the value of a site
    /// that makes arrays (of the run's arena, not handed over) or of a
    /// dropped pop, through a `select` of a making site (the select too) or
    /// through such a phi, each with that site: each push of such a value
    /// is counted, also of the array it was entered with (but of a select's
    /// other array, `through`; the pop's word, for a pop's), and the site's
    /// walk takes those pushes as its own (so the site is released, or the
    /// pop dropped, and the array freed once the tapes let go of it too).
    pub(super) entered: HashMap<Value, Value>,
    /// The choosing phis among `latch` ("Choosing phis"), each with its
    /// web's sites, which are among `sites` with the phi's way.
    pub(super) webs: Vec<Web>,
    /// The phis among `entered` entered with `select(c, s, x)` of a site
    /// `s`, and those selects, each with `x`: a push counts its reference
    /// unless it pushes `x`, an array from elsewhere.
    pub(super) through: HashMap<Value, Operand>,
    /// The latch-owning phis among `latch` whose arrays may leave their
    /// loops, but only into phis that let go of nothing they are entered
    /// with and count their pushes ("Leaving into a counting phi"): each
    /// lets go of the array it holds at a normal return.
    pub(super) at_return: HashSet<Value>,
    /// The handing chains ("Handing chains"), whose phis are among
    /// `latch` (each with the chain's `leaves`) but let go as their chain
    /// does.
    pub(super) chains: Vec<Chain>,
    /// Whether the module's tapes are counted (`Module::counted_tapes`):
    /// then every push of the value of a statement that makes arrays, as
    /// it is, is counted, whether the function lets go of it or not
    /// ("Fresh results": its caller may).
    pub(super) counted: bool,
    /// The `invoke`s passing arrays to parameters their callees only push
    /// as they are, each with those arguments' positions, when such an
    /// argument may be passed tagged ("Pushed parameters"); else empty.
    pub(super) passed: HashMap<Inst, Vec<usize>>,
    /// The phis shaped as either phis whose entry holds only arrays sites
    /// of the function made or the function's parameters, their latches'
    /// calls' leaves, and the phis handed only those ("Entered with made
    /// arrays"): every push of one, and every passing of it to a parameter
    /// its callee pushes, is counted (a tagged word) while it holds no
    /// parameter's array; each with those parameters.
    pub(super) counting: HashMap<Value, Vec<Value>>,
    /// The phis of sharing webs entered from outside with dropped pops or
    /// released sites' arrays, as they are or through `select`s, each with
    /// those pops and sites, and those `select`s, each with the ones it may
    /// hold ("Webs entered with pops"): a push of such a value holding one
    /// of their arrays pushes that pop's word, or the array tagged.
    pub(super) web_entered: HashMap<Value, Vec<Value>>,
    /// The latch-owning phis entered from outside their loops with a phi of
    /// a sharing web, each with that phi ("Entered with a web's phi"):
    /// every push of one counts, holding its entry as a push of that phi
    /// would (the web's slots are as the web left its loop), and its own
    /// arrays tagged.
    pub(super) web_phi_entered: HashMap<Value, Value>,
    /// The phis of sharing webs entered from outside with phis of other
    /// sharing webs, each with those phis ("Webs entered with a web's
    /// phis"): a push of one holding such a phi's array pushes what a push
    /// of that phi would.
    pub(super) web_webs: HashMap<Value, Vec<Value>>,
    /// The values of calls of fresh leaves (`fresh::Calls::sites`, the
    /// function letting go of them or not): every push of one as it is
    /// is counted in a module whose tapes are counted, as a push of a
    /// statement's own array is ("Fresh results pushed on").
    pub(super) called: HashSet<Value>,
}

/// A handing chain (module header, "Handing chains"): header phis each of
/// which takes, from every latch, the array the next held (`prev = cur;
/// cur = next;`), the head taking arrays sites of the loop make.
#[derive(Clone, Debug)]
pub(super) struct Chain {
    /// The head (whose sites are handed over to it).
    pub(super) head: Value,
    /// The operand the head is entered with from outside the loop.
    pub(super) entry: Operand,
    /// The chain's phis, tail first (the head last).
    pub(super) phis: Vec<Value>,
    /// What the chain's phis are entered with that a push of a chain phi
    /// holding it counts: a site making arrays (not handed over), a
    /// dropped pop, or a latch-owning phi entered with a site (not through
    /// a `select`); each with the site (or pop) whose walk takes those
    /// pushes as its own, and how the push counts.
    pub(super) entered: Vec<(Value, Value, ChainEntry)>,
}

/// How a push of a handing chain's phi holding an array it was entered
/// with counts ([`Chain::entered`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ChainEntry {
    /// An array of the run's arena: tagged.
    Made,
    /// A dropped pop's array: the word the pop read.
    Popped,
}

/// A choosing phi (module header, "Choosing phis"): a loop header's phi
/// whose latch brings, through phis of the loop's body (its web), either
/// its own array or one that a site of the body made in the iteration.
/// The lowering lets go of the arrays on the edges into the header.
#[derive(Clone, Debug)]
pub(super) struct Web {
    /// The header's phi.
    pub(super) phi: Value,
    /// Its statement.
    pub(super) inst: Inst,
    /// The loop's header.
    pub(super) header: Block,
    /// The one block entering the header from outside the loop.
    pub(super) outside: Block,
    /// The sites whose arrays the web may take, each run at most once
    /// between two entries of the header.
    pub(super) sites: Vec<Value>,
    /// For a sharing web ("Sharing webs"), the header's other phis that
    /// own its arrays with `phi`, each with its statement (else empty).
    pub(super) others: Vec<(Value, Inst)>,
    /// For a sharing web, its phis of the loop's body, whose pushes are
    /// worded as its header phis' are ("Pushed body phis"; else empty).
    pub(super) body: Vec<Value>,
    /// Whether an array of the web may leave the loop (then the slots are
    /// emptied without letting go on the edge from outside and at the
    /// return).
    pub(super) leaves: bool,
    /// Whether it is a sharing web ("Sharing webs"; of one phi when no
    /// other rule owns it, "Webs of one phi").
    pub(super) shared: bool,
}

impl Web {
    /// Whether this is a sharing web ("Sharing webs"), of one phi or more
    /// (`others`), rather than a choosing phi's.
    pub(super) fn sharing(&self) -> bool {
        self.shared
    }

    /// The header phis owning the web's arrays: `phi`, then the others.
    pub(super) fn phis(&self) -> impl Iterator<Item = Value> + '_ {
        std::iter::once(self.phi).chain(self.others.iter().map(|&(q, _)| q))
    }

    /// [`Web::phis`], each with its statement.
    pub(super) fn phi_insts(&self) -> impl Iterator<Item = (Value, Inst)> + '_ {
        std::iter::once((self.phi, self.inst)).chain(self.others.iter().copied())
    }
}

/// What `func` lets go of itself (module header); `summaries` says which
/// parameters of its callees its arrays may be passed to (computed here
/// for callees not yet summarised).
pub(super) fn freed_sites(func: &Func, module: &Module, summaries: &mut Summaries) -> Freed {
    let mut freed = Freed {
        sites: Vec::new(),
        handed: Vec::new(),
        latch: Vec::new(),
        entered: HashMap::default(),
        webs: Vec::new(),
        through: HashMap::default(),
        at_return: HashSet::default(),
        chains: Vec::new(),
        counted: module.counted_tapes(),
        passed: HashMap::default(),
        either: HashSet::default(),
        counting: HashMap::default(),
        either_results: HashMap::default(),
        web_entered: HashMap::default(),
        web_phi_entered: HashMap::default(),
        web_webs: HashMap::default(),
        called: HashSet::default(),
    };
    // Without counted tapes (`Module::counted_tapes`), a push is an escape
    // and pops are no sites, as before tapes were counted.
    let counted = module.counted_tapes();
    summaries.uncounted |= !counted;
    let own_site = |i: Inst| match (&func.insts[i].kind, func.insts[i].result) {
        (
            InstKind::Prim {
                prim: Prim::Alloc | Prim::Zeros | Prim::Copy | Prim::Sdense,
                ..
            },
            Some(r),
        ) => Some(r),
        (
            InstKind::Prim {
                prim: Prim::Pop, ..
            },
            Some(r),
        ) if counted && matches!(func.values.get(r).map(|d| &d.ty), Some(Type::Array(_))) => {
            Some(r)
        }
        _ => None,
    };
    // A call whose result may hold an array may make one ("Fresh results").
    let calls_arrays = |i: Inst| {
        matches!(func.insts[i].kind, InstKind::Invoke { .. })
            && func.insts[i]
                .result
                .and_then(|r| func.values.get(r))
                .is_some_and(|d| d.ty.holds_array())
    };
    if !func
        .insts
        .keys()
        .any(|i| own_site(i).is_some() || calls_arrays(i))
    {
        return freed;
    }
    let roots: Vec<FuncId> = callees(func).collect();
    summaries.ensure(module, &roots);
    let cfg = ControlFlowGraph::with_function(func);
    let dom = DominatorTree::with_cfg(&cfg);
    let uses = Uses::of(func, &dom);
    let mut calls = fresh::Calls::of(func, &dom, &uses, summaries);
    freed.called = calls.sites.keys().copied().collect();
    // A callee's push of its fresh array is counted only if it was
    // compiled with counted tapes: with every function so far compiled so
    // (the module's flag is set before its pieces are compiled, and not
    // unset), so are all those compiled later.
    if summaries.uncounted {
        calls.sites.retain(|_, &mut pushed| !pushed);
    }
    let mut either = either_calls(func, (&dom, &uses), summaries);
    if summaries.uncounted {
        either.retain(|_, c| !c.pushed && !c.param_pushed);
    }
    let sites: Vec<(Value, Block)> = func
        .layout
        .iter()
        .flat_map(|&b| func.blocks[b].insts.iter().map(move |&i| (b, i)))
        .filter_map(|(b, i)| {
            let called = func.insts[i].result.filter(|r| calls.sites.contains_key(r));
            own_site(i).or(called).map(|r| (r, b))
        })
        .collect();
    if sites.is_empty() && either.is_empty() {
        return freed;
    }
    // A value passed to a parameter its callee only pushes is passed
    // tagged only when the callee masks it: compiled counted, as every
    // function is once none was compiled uncounted ("Pushed parameters").
    let tags = counted && !summaries.uncounted;
    // And what a site's walk may follow through either calls.
    if tags {
        freed.passed = passed_to_pushers(func, summaries);
        either_passing(func, (&cfg, &dom), (&either, &sites), &mut freed);
    }
    let mut walk = Walk {
        func,
        uses: &uses,
        summaries,
        budget: BUDGET,
        entered: HashMap::default(),
        chain_entered: HashMap::default(),
        born_pushed: calls
            .sites
            .iter()
            .filter(|&(_, &pushed)| pushed)
            .map(|(&v, _)| v)
            .collect(),
        aliases: calls.aliases,
        param_pushes: false,
        tags,
        passthrough: None,
        either_leaf: either_leaves(&either),
        counting: freed.counting.keys().copied().collect(),
        handed_back: either
            .iter()
            .filter(|(_, c)| c.only_param)
            .map(|(&v, c)| (v, c.arg))
            .collect(),
    };
    let sites: Vec<(Value, Block)> = sites
        .into_iter()
        .filter(|&(_, b)| dom.is_reachable(b))
        .collect();
    let mut owned = owning_phis(func, &cfg, &dom, (&sites, &either), &mut walk);
    // A site is handed over to one phi at most (the rules make sure of it;
    // should two ever claim one, neither owns anything).
    let mut claims: HashMap<Value, usize> = HashMap::default();
    for o in &owned {
        for &s in o.from.iter().chain(o.web.iter().flat_map(|w| &w.sites)) {
            *claims.entry(s).or_default() += 1;
        }
    }
    owned.retain(|o| {
        o.from
            .iter()
            .chain(o.web.iter().flat_map(|w| &w.sites))
            .all(|s| claims[s] == 1)
    });
    // A phi that releases is pushed: without counted tapes, an escape.
    owned.retain(|o| counted || o.letgo != Letgo::Release);
    // A handing chain owns as a whole: its phis go with its head. They
    // count their pushes by their slots and what they are entered with
    // (`Freed::chains`), not as entered phis.
    let in_chain: HashSet<Value> = owned
        .iter()
        .filter_map(|o| o.chain.as_ref())
        .flatten()
        .copied()
        .collect();
    owned.retain(|o| !o.in_chain || in_chain.contains(&o.phi));
    let handed: HashSet<Value> = owned.iter().flat_map(|o| o.from.iter().copied()).collect();
    // A web's sites let go of their arrays as its phi does, on the edges
    // into its header.
    let webbed: HashSet<Value> = owned
        .iter()
        .flat_map(|o| o.web.iter().flat_map(|w| w.sites.iter().copied()))
        .collect();
    freed.latch = owned
        .iter()
        .filter_map(|o| o.latch.map(|l| (o.phi, l)))
        .collect();
    let either_at_return = either_phis(&owned, &mut freed);
    // An either phi counts a push of itself only when it holds an array a
    // call made (never its entry's): no site takes its pushes as its own,
    // nor does one it enters.
    let latch: Vec<(Value, (Operand, bool))> = freed
        .latch
        .iter()
        .filter(|(p, _)| !freed.either.contains(p))
        .copied()
        .collect();
    let makers = makers(func, &sites);
    let ours = |e: Value| makers.contains_key(&e) && !handed.contains(&e) && !webbed.contains(&e);
    // A pop of an array (a replay's snapshot array, entering its loop).
    let a_pop = |e: Value| sites.iter().any(|&(s, _)| s == e) && !makers.contains_key(&e);
    let (entered, through) = entered_phis(func, &latch, &in_chain, (&ours, &a_pop));
    walk.entered = entered;
    let chains = chains_of(&owned, &latch, (&walk.entered, &through), (&ours, &a_pop));
    walk.chain_entered = chains
        .iter()
        .flat_map(|c| {
            let sites: Vec<Value> = c.entered.iter().map(|&(_, s, _)| s).collect();
            c.phis.iter().map(move |&p| (p, sites.clone()))
        })
        .collect();
    let web_pops = web_counting(
        func,
        (&owned, &in_chain, &through),
        &mut walk,
        (&ours, &a_pop),
        &mut freed,
    );
    freed.through = through;
    freed.entered = walk.entered.clone();
    freed.sites = sites
        .into_iter()
        .filter(|(a, _)| !handed.contains(a) && !webbed.contains(a))
        .filter_map(|(a, b)| {
            let pushed = walk.stays_inside(a, Some((b, &dom)), None)?;
            if pushed && !counted {
                return None;
            }
            let popped = matches!(
                func.def_kind(a),
                Some(InstKind::Prim {
                    prim: Prim::Pop,
                    ..
                })
            );
            Some(match (popped, pushed) {
                (true, _) => (a, Letgo::Drop),
                (false, true) => (a, Letgo::Release),
                (false, false) => (a, Letgo::Free),
            })
        })
        .collect();
    // A phi entered with a pop counts its pushes only when that pop lets go
    // (a dropped pop, whose word a push of the phi holding its array pushes
    // again); else it is a latch-owning phi like any other.
    let dropped: HashSet<Value> = freed
        .sites
        .iter()
        .filter(|&&(_, l)| l == Letgo::Drop)
        .map(|&(v, _)| v)
        .collect();
    freed
        .entered
        .retain(|_, s| makers.contains_key(s) || dropped.contains(s));
    freed.web_entered = let_go_of(web_pops, &freed.sites);
    freed.chains = chains;
    for c in &mut freed.chains {
        c.entered
            .retain(|(_, s, _)| makers.contains_key(s) || dropped.contains(s));
    }
    freed.at_return = at_return(&owned, &freed);
    freed.at_return.extend(webs_at_return(
        func,
        &owned,
        (&freed.web_phi_entered, &freed.web_webs),
        &freed.entered,
    ));
    hand_to_owners(owned, &mut freed);
    // Either phis whose arrays leave only into phis that are only read
    // let go at the return as they are (no counting phi pushes them).
    freed.at_return.extend(either_at_return);
    freed
}

/// The phis that own arrays and their sites into `freed`, each phi
/// releasing when it lets go at the return of an array another phi may
/// have pushed ([`Freed::at_return`], computed before).
fn hand_to_owners(owned: Vec<Owner>, freed: &mut Freed) {
    for Owner {
        phi,
        letgo,
        from,
        web,
        ..
    } in owned
    {
        // A phi letting go at the return of an array a counting phi pushed
        // must release it, whatever its own pushes (a review found one
        // freeing it under the tape's references).
        let own = match freed.at_return.contains(&phi) {
            true => Letgo::Release,
            false => letgo,
        };
        freed.sites.push((phi, own));
        freed.handed.extend(from.into_iter().map(|s| (s, letgo)));
        if let Some(w) = web {
            freed.sites.extend(w.sites.iter().map(|&s| (s, own)));
            freed.sites.extend(w.others.iter().map(|&(q, _)| (q, own)));
            freed.webs.push(w);
        }
    }
}

/// `entries`, each value's pops and sites restricted to those of `sites`
/// that let go (dropped or released), and without the values left with
/// none: a web counts the pushes of what it was entered with only for
/// those ([`Freed::web_entered`]).
fn let_go_of(
    entries: HashMap<Value, Vec<Value>>,
    sites: &[(Value, Letgo)],
) -> HashMap<Value, Vec<Value>> {
    let lets_go: HashSet<Value> = sites
        .iter()
        .filter(|&&(_, l)| l != Letgo::Free)
        .map(|&(v, _)| v)
        .collect();
    entries
        .into_iter()
        .map(|(p, mut held)| {
            held.retain(|s| lets_go.contains(s));
            (p, held)
        })
        .filter(|(_, held)| !held.is_empty())
        .collect()
}

/// What the sharing webs of `owned` and the `select`s and latch-owning
/// phis they are entered through or enter are entered with, whose pushes
/// those pops and sites count as their own (added to `walk`'s
/// `chain_entered`; module header, "Webs entered with pops", "Entered with
/// a web's phi"); sets [`Freed::web_phi_entered`].
fn web_counting(
    func: &Func,
    (owned, in_chain, through): (&[Owner], &HashSet<Value>, &HashMap<Value, Operand>),
    walk: &mut Walk<'_>,
    (ours, a_pop): (&dyn Fn(Value) -> bool, &dyn Fn(Value) -> bool),
    freed: &mut Freed,
) -> HashMap<Value, Vec<Value>> {
    let mut web_pops = web_entries(func, owned, (ours, a_pop));
    pushed_selects(func, (ours, a_pop), &mut web_pops);
    // A select a latch-owning phi is also entered through counts as that
    // phi's (`Freed::through`).
    web_pops.retain(|v, _| !through.contains_key(v) && !walk.entered.contains_key(v));
    freed.web_phi_entered = entered_with_web(owned, &walk.entered, in_chain);
    for (&q, p) in &freed.web_phi_entered {
        if let Some(pops) = web_pops.get(p).cloned() {
            web_pops.insert(q, pops);
        }
    }
    // A web entered with another web's phis may hold what that one was
    // entered with.
    freed.web_webs = webs_entered_with_webs(func, owned);
    for (&q, ps) in &freed.web_webs {
        let theirs: Vec<Value> = ps
            .iter()
            .filter_map(|p| web_pops.get(p))
            .flatten()
            .copied()
            .collect();
        let mine = web_pops.entry(q).or_default();
        mine.extend(theirs);
        mine.sort_unstable();
        mine.dedup();
    }
    for (&p, pops) in &web_pops {
        walk.chain_entered.entry(p).or_default().extend(pops);
    }
    web_pops
}

/// The either phis among `owned` ([`Freed::either`]), their calls'
/// results ([`Freed::either_results`]) and the arguments their calls pass
/// tagged ([`Freed::passed`]) into `freed`; returns those that let go of
/// their last array at the return although it may leave the loop ("Exit
/// phis of either phis").
fn either_phis(owned: &[Owner], freed: &mut Freed) -> Vec<Value> {
    let either = || {
        owned
            .iter()
            .filter_map(|o| o.either.as_ref().map(|e| (o, e)))
    };
    freed.either = either().map(|(o, _)| o.phi).collect();
    freed.either_results = either()
        .flat_map(|(o, _)| o.from.iter().map(|&v| (v, o.phi)))
        .collect();
    for (inst, k) in either().flat_map(|(_, (passed, _))| passed) {
        freed.passed.entry(*inst).or_default().push(*k);
    }
    either()
        .filter(|(_, (_, at_return))| *at_return)
        .map(|(o, _)| o.phi)
        .collect()
}

/// The latch-owning phis of `latch` (but those `in_chain`) entered with a
/// site's array (`ours`), a pop's (`a_pop`), through a `select` of a site
/// and another array, or with such a phi, each with that site
/// ([`Freed::entered`]); and those entered through a `select`, each with
/// the other array ([`Freed::through`]).
fn entered_phis(
    func: &Func,
    latch: &[(Value, (Operand, bool))],
    in_chain: &HashSet<Value>,
    (ours, a_pop): (&dyn Fn(Value) -> bool, &dyn Fn(Value) -> bool),
) -> (HashMap<Value, Value>, HashMap<Value, Operand>) {
    let mut through: HashMap<Value, Operand> = HashMap::default();
    let mut entered: HashMap<Value, Value> = latch
        .iter()
        .filter(|(p, _)| !in_chain.contains(p))
        .filter_map(|&(p, (e, _))| {
            let Operand::Value(e) = e else {
                return None;
            };
            if ours(e) || a_pop(e) {
                return Some([(p, e), (p, e)]);
            }
            // Entered with `select(c, s, x)` of such a site `s` and another
            // array `x` (a replay's start shadow: a fresh one, or the one
            // it was given).
            let Some(InstKind::Prim {
                prim: Prim::Select,
                args,
            }) = func.def_kind(e)
            else {
                return None;
            };
            let [_, a, b] = args.as_slice() else {
                return None;
            };
            let site = |op: &Operand| match op {
                Operand::Value(v) if ours(*v) => Some(*v),
                _ => None,
            };
            let (s, x) = match (site(a), site(b)) {
                (Some(s), None) => (s, *b),
                (None, Some(s)) => (s, *a),
                _ => return None,
            };
            through.insert(p, x);
            through.insert(e, x);
            Some([(p, s), (e, s)])
        })
        .flatten()
        .collect();
    // A latch-owning phi entered with another that is entered so (the
    // recording loop of a replay, entered with its split's phi) counts
    // every push of itself too, and the site takes those as its own.
    loop {
        let mut added = false;
        for &(p, (e, _)) in latch {
            let Operand::Value(q) = e else {
                continue;
            };
            if entered.contains_key(&p)
                || in_chain.contains(&p)
                || !latch.iter().any(|&(l, _)| l == q)
            {
                continue;
            }
            if let Some(&s) = entered.get(&q) {
                entered.insert(p, s);
                if let Some(&x) = through.get(&q) {
                    through.insert(p, x);
                }
                added = true;
            }
        }
        if !added {
            return (entered, through);
        }
    }
}

/// The handing chains among `owned` (their phis among `latch`), each with
/// what its phis are entered with that its pushes count: a site (`ours`),
/// a pop (`a_pop`), or a phi of `entered` (not entered through a `select`,
/// `through`) with its site ([`Chain::entered`]).
fn chains_of(
    owned: &[Owner],
    latch: &[(Value, (Operand, bool))],
    (entered, through): (&HashMap<Value, Value>, &HashMap<Value, Operand>),
    (ours, a_pop): (&dyn Fn(Value) -> bool, &dyn Fn(Value) -> bool),
) -> Vec<Chain> {
    owned
        .iter()
        .filter_map(|o| {
            let phis = o.chain.clone()?;
            let mut counted = Vec::new();
            for p in &phis {
                let Some(&(_, (Operand::Value(e), _))) = latch.iter().find(|l| l.0 == *p) else {
                    continue;
                };
                if ours(e) {
                    counted.push((e, e, ChainEntry::Made));
                } else if a_pop(e) {
                    counted.push((e, e, ChainEntry::Popped));
                } else if let Some(&s) = entered.get(&e)
                    && !through.contains_key(&e)
                {
                    // A phi entered with a pop holds that pop's array (its
                    // word first) or arrays its latch brought.
                    if a_pop(s) {
                        counted.push((s, s, ChainEntry::Popped));
                    }
                    counted.push((e, s, ChainEntry::Made));
                }
            }
            // Phis entered with one array (`let mut a = x; let mut b = x;`)
            // need its test once.
            let mut seen: HashSet<Value> = HashSet::default();
            counted.retain(|&(e, _, _)| seen.insert(e));
            Some(Chain {
                head: o.phi,
                entry: o.latch?.0,
                phis,
                entered: counted,
            })
        })
        .collect()
}

/// The latch-owning phis of `owned` (in `freed.latch`) whose arrays leave
/// their loops only as the phi itself entering other latch-owning phis
/// from outside their loops, each of which counts every push of itself
/// (`freed.entered`) and keeps its own arrays inside its loop or is one of
/// these itself (module header, "Leaving into a counting phi").
fn at_return(owned: &[Owner], freed: &Freed) -> HashSet<Value> {
    let latch: HashMap<Value, (Operand, bool)> = owned
        .iter()
        .filter(|o| o.web.is_none())
        .filter_map(|o| o.latch.map(|l| (o.phi, l)))
        .collect();
    let mut out: HashSet<Value> = HashSet::default();
    loop {
        let mut added = false;
        for o in owned {
            if o.into.is_empty() || out.contains(&o.phi) {
                continue;
            }
            // A handing chain entered with `p` counts pushes of it too.
            let counts = |q: &Value| {
                let counting = freed.entered.contains_key(q)
                    || freed.chains.iter().any(|c| {
                        c.phis.contains(q) && c.entered.iter().any(|&(e, _, _)| e == o.phi)
                    });
                counting
                    && latch.get(q).is_some_and(|&(e, leaves)| {
                        e == Operand::Value(o.phi) && (!leaves || out.contains(q))
                    })
            };
            if o.into.iter().all(counts) {
                out.insert(o.phi);
                added = true;
            }
        }
        if !added {
            return out;
        }
    }
}

/// The phis of the sharing webs of `owned` entered from outside with pops
/// (`a_pop`) or arrays of sites (`ours`), as they are or through `select`s,
/// each with every such pop and site of its web (any phi of the web may
/// come to hold any of their arrays), and those `select`s, each with the
/// pops and sites it may hold (module header, "Webs entered with pops").
fn web_entries(
    func: &Func,
    owned: &[Owner],
    (ours, a_pop): (&dyn Fn(Value) -> bool, &dyn Fn(Value) -> bool),
) -> HashMap<Value, Vec<Value>> {
    let mut out: HashMap<Value, Vec<Value>> = HashMap::default();
    for w in owned.iter().filter_map(|o| o.web.as_ref()) {
        if !w.sharing() {
            continue;
        }
        let phis: Vec<(Value, Inst)> = w.phi_insts().collect();
        let mut all: Vec<Value> = Vec::new();
        for &(_, inst) in &phis {
            let InstKind::Phi { entries } = &func.insts[inst].kind else {
                continue;
            };
            for (b, op) in entries {
                if let (true, Operand::Value(e)) = (*b == w.outside, op) {
                    all.extend(selected(func, *e, (ours, a_pop), &mut out));
                }
            }
        }
        all.sort_unstable();
        all.dedup();
        if !all.is_empty() {
            for p in phis.iter().map(|&(p, _)| p).chain(w.body.iter().copied()) {
                out.insert(p, all.clone());
            }
        }
    }
    out
}

/// The phis of the sharing webs of `owned` entered from outside with
/// phis of other sharing webs, each with every such phi its web is
/// entered with ([`Freed::web_webs`]).
fn webs_entered_with_webs(func: &Func, owned: &[Owner]) -> HashMap<Value, Vec<Value>> {
    let webs: Vec<&Web> = owned
        .iter()
        .filter_map(|o| o.web.as_ref())
        .filter(|w| w.sharing())
        .collect();
    let phis_of = |w: &Web| -> Vec<(Value, Inst)> { w.phi_insts().collect() };
    let mut out: HashMap<Value, Vec<Value>> = HashMap::default();
    for w in &webs {
        let mine = phis_of(w);
        let mut from: Vec<Value> = Vec::new();
        for &(_, inst) in &mine {
            let InstKind::Phi { entries } = &func.insts[inst].kind else {
                continue;
            };
            for (b, op) in entries {
                if let (true, Operand::Value(e)) = (*b == w.outside, op)
                    && !from.contains(e)
                    && webs
                        .iter()
                        .any(|x| x.phi != w.phi && phis_of(x).iter().any(|&(p, _)| p == *e))
                {
                    from.push(*e);
                }
            }
        }
        if !from.is_empty() {
            for p in mine.iter().map(|&(p, _)| p).chain(w.body.iter().copied()) {
                out.insert(p, from.clone());
            }
        }
    }
    out
}

/// The pops and sites (`a_pop`, `ours`) value `e` may hold as it is or
/// through `select`s; each `select` met goes into `out` with those it may
/// hold.
fn selected(
    func: &Func,
    e: Value,
    (ours, a_pop): (&dyn Fn(Value) -> bool, &dyn Fn(Value) -> bool),
    out: &mut HashMap<Value, Vec<Value>>,
) -> Vec<Value> {
    if ours(e) || a_pop(e) {
        return vec![e];
    }
    let Some(InstKind::Prim {
        prim: Prim::Select,
        args,
    }) = func.def_kind(e)
    else {
        return Vec::new();
    };
    if let Some(held) = out.get(&e) {
        return held.clone();
    }
    let mut held = Vec::new();
    for op in args.iter().skip(1) {
        if let Operand::Value(v) = op
            && *v != e
        {
            held.extend(selected(func, *v, (ours, a_pop), out));
        }
    }
    held.sort_unstable();
    held.dedup();
    if !held.is_empty() {
        out.insert(e, held.clone());
    }
    held
}

/// The `select`s of arrays `func` pushes as they are, each with the pops
/// and sites (`a_pop`, `ours`) it may hold through `select`s, into `out`
/// (module header, "Pushed selects"); those a latch-owning phi is entered
/// through are taken out again by the caller, counted as that phi's.
fn pushed_selects(
    func: &Func,
    (ours, a_pop): (&dyn Fn(Value) -> bool, &dyn Fn(Value) -> bool),
    out: &mut HashMap<Value, Vec<Value>>,
) {
    for data in func.insts.values() {
        if let InstKind::Prim {
            prim: Prim::Push,
            args,
        } = &data.kind
            && let Some(Operand::Value(v)) = args.first()
            && let Some(InstKind::Prim {
                prim: Prim::Select, ..
            }) = func.def_kind(*v)
        {
            selected(func, *v, (ours, a_pop), out);
        }
    }
}

/// The latch-owning phis of `owned` (not of a chain, an either phi, nor
/// `entered` otherwise) entered from outside their loops with a phi of a
/// sharing web, each with that phi ([`Freed::web_phi_entered`]).
fn entered_with_web(
    owned: &[Owner],
    entered: &HashMap<Value, Value>,
    in_chain: &HashSet<Value>,
) -> HashMap<Value, Value> {
    let web_phis: HashSet<Value> = owned
        .iter()
        .filter_map(|o| o.web.as_ref())
        .filter(|w| w.sharing())
        .flat_map(Web::phis)
        .collect();
    owned
        .iter()
        .filter(|o| {
            o.web.is_none()
                && o.chain.is_none()
                && !o.in_chain
                && !in_chain.contains(&o.phi)
                && o.either.is_none()
                && !entered.contains_key(&o.phi)
        })
        .filter_map(|o| match o.latch {
            Some((Operand::Value(e), _)) if web_phis.contains(&e) => Some((o.phi, e)),
            _ => None,
        })
        .collect()
}

/// The sharing webs of `owned` whose arrays leave their loops only as
/// their phis entering latch-owning phis from outside those phis' loops,
/// or phis of other sharing webs entered with its phis
/// ([`Freed::web_webs`]), each of which is never pushed nor passed to be
/// pushed (its own walk met no push: `Owner::quiet`) or counts every push
/// of itself ([`Freed::web_phi_entered`], or a web's), and keeps its arrays inside its own loop: each
/// web lets go of its slots at a normal return (module header, "Webs
/// leaving into a phi never pushed").
fn webs_at_return(
    func: &Func,
    owned: &[Owner],
    (counting, web_webs): (&HashMap<Value, Value>, &HashMap<Value, Vec<Value>>),
    entered: &HashMap<Value, Value>,
) -> Vec<Value> {
    let mut out = Vec::new();
    for o in owned {
        let Some(w) = o.web.as_ref().filter(|w| w.leaves) else {
            continue;
        };
        let phis: Vec<Value> = w.phis().collect();
        let never_pushed = |q: &Value| {
            owned.iter().any(|r| {
                r.phi == *q
                    && r.web.is_none()
                    && r.chain.is_none()
                    && !r.in_chain
                    && r.either.is_none()
                    && (r.quiet || counting.contains_key(q))
                    && r.latch.is_some_and(|(e, leaves)| {
                        !leaves && phis.iter().any(|&p| e == Operand::Value(p))
                    })
            })
        };
        // A phi of another web entered with one of this web's phis itself
        // (not a site or a phi of the body: a review found a site's array,
        // entering such a phi from an exit inside the loop, freed here
        // under the other web's untagged push), whose arrays stay in its
        // loop: it pushes this web's arrays as this web does.
        let web_counts = |q: &Value| {
            web_webs
                .get(q)
                .is_some_and(|ps| ps.iter().any(|p| phis.contains(p)))
                && owned.iter().any(|r| {
                    r.web.as_ref().is_some_and(|x| {
                        let inst = x.phi_insts().find(|&(y, _)| y == *q).map(|(_, i)| i);
                        let entry = inst.and_then(|i| match &func.insts[i].kind {
                            InstKind::Phi { entries } => entries
                                .iter()
                                .find(|(b, _)| *b == x.outside)
                                .map(|(_, op)| *op),
                            _ => None,
                        });
                        !x.leaves
                            && entry.is_some_and(|e| phis.iter().any(|&p| e == Operand::Value(p)))
                    })
                })
        };
        // A choosing phi entered with one of this web's phis, never pushed
        // (nor are its body's phis, or it would not be one), whose arrays
        // stay in its loop: its slot never holds the array it is entered
        // with, and no tape does ("Choosing phis leaving into quiet
        // ones").
        let quiet_choosing = |q: &Value| {
            owned.iter().any(|r| {
                r.phi == *q
                    && (r.quiet || (entered.contains_key(q) && o.letgo == Letgo::Release))
                    && r.web.as_ref().is_some_and(|x| !x.sharing() && !x.leaves)
                    && r.latch.is_some_and(|(e, leaves)| {
                        !leaves && phis.iter().any(|&p| e == Operand::Value(p))
                    })
            })
        };
        if !o.into.is_empty()
            && o.into
                .iter()
                .all(|q| never_pushed(q) || web_counts(q) || quiet_choosing(q))
        {
            out.push(o.phi);
        }
    }
    out
}

/// A phi that owns arrays (module header, "Owning phis", "Latch-owning
/// phis"): how it lets go, the sites handed over to it, and for a phi that
/// owns only what its latch brings, the operand it is entered with from
/// outside its loop and whether its arrays may leave the loop.
struct Owner {
    phi: Value,
    letgo: Letgo,
    from: Vec<Value>,
    latch: Option<(Operand, bool)>,
    /// For a latch-owning phi whose arrays leave its loop only as the phi
    /// itself entering phis after it, those phis (else empty).
    into: Vec<Value>,
    /// For a choosing phi, its web (`from` is then empty).
    web: Option<Web>,
    /// For the head of a handing chain, the chain's phis, tail first (the
    /// others' owners have none).
    chain: Option<Vec<Value>>,
    /// Whether it is a phi of a handing chain (the head included).
    in_chain: bool,
    /// For an either phi ("Either results"), a latch-owning phi whose
    /// latches bring calls of either functions passed the phi: the calls
    /// passing it to a parameter their callee pushes, with its position
    /// (passed tagged while the phi holds an array of its own); and
    /// whether it lets go of its slot's array at a normal return although
    /// its arrays may leave the loop (only into phis after it that are
    /// only read: "Exit phis of either phis").
    either: Option<(Vec<(Inst, usize)>, bool)>,
    /// For a latch-owning phi, whether the walk of the phi itself met no
    /// push of what it reaches (its sites may still be pushed).
    quiet: bool,
}

/// The owning phis of `func`: a phi of type `[T]` whose every entry is a
/// site that makes arrays (`sites`, reachable), used by no other phi,
/// whose values are not used where the phi's block leads without the site
/// running again, and which stays inside the function but for the phi;
/// the phi itself stays inside as a site of its block does. Else, a
/// latch-owning phi: entered from exactly one block outside its loop (a
/// block its own does not dominate) with any array, and from the others
/// only with such sites; its values stay inside the loop but for uses
/// after it.
fn owning_phis(
    func: &Func,
    cfg: &ControlFlowGraph,
    dom: &DominatorTree,
    (sites, either): (&[(Value, Block)], &HashMap<Value, EitherCall>),
    walk: &mut Walk<'_>,
) -> Vec<Owner> {
    let makers = makers(func, sites);
    let mut out = Vec::new();
    if makers.is_empty() && either.is_empty() {
        return out;
    }
    // Every phi of type `[T]` of a reachable block, with its statement and
    // block.
    let mut phis: ArrayPhis = HashMap::default();
    for &b in &func.layout {
        if !dom.is_reachable(b) {
            continue;
        }
        for &inst in &func.blocks[b].insts {
            if let (InstKind::Phi { .. }, Some(p)) =
                (&func.insts[inst].kind, func.insts[inst].result)
                && matches!(func.values.get(p).map(|d| &d.ty), Some(Type::Array(_)))
            {
                phis.insert(p, (inst, b));
            }
        }
    }
    for &h in &func.layout {
        if !dom.is_reachable(h) {
            continue;
        }
        for &inst in &func.blocks[h].insts {
            let data = &func.insts[inst];
            let (InstKind::Phi { entries }, Some(p)) = (&data.kind, data.result) else {
                continue;
            };
            if !matches!(func.values.get(p).map(|d| &d.ty), Some(Type::Array(_))) {
                continue;
            }
            let phi = (h, inst, p, entries.as_slice());
            let owner = owning(func, (cfg, dom), walk, &makers, phi)
                .or_else(|| latch_owning(func, (cfg, dom), walk, &makers, phi))
                .or_else(|| choosing(func, (cfg, dom), walk, (&makers, &phis), phi))
                .or_else(|| either_owning(func, (cfg, dom), walk, either, phi));
            out.extend(owner);
        }
    }
    let owned: HashSet<Value> = out.iter().map(|o| o.phi).collect();
    for &h in &func.layout {
        if dom.is_reachable(h) {
            out.extend(handing(func, (cfg, dom), walk, &makers, h, &owned));
        }
    }
    let owned: HashSet<Value> = out.iter().map(|o| o.phi).collect();
    for &h in &func.layout {
        if dom.is_reachable(h) {
            let webs = sharing::sharing(func, (cfg, dom), walk, (&makers, &phis), h, &owned);
            out.extend(webs);
        }
    }
    out
}

/// The handing chains of header `h` (module header, "Handing chains"),
/// among its `[T]` phis not in `owned`, each phi as an owner (the head's
/// with the chain, tail first).
fn handing(
    func: &Func,
    (cfg, dom): (&ControlFlowGraph, &DominatorTree),
    walk: &mut Walk<'_>,
    makers: &HashMap<Value, Block>,
    h: Block,
    owned: &HashSet<Value>,
) -> Vec<Owner> {
    // Each candidate: (statement, value, entry from outside, latch entries).
    let mut cands: Vec<(Inst, Value, Operand, Vec<Operand>)> = Vec::new();
    for &inst in &func.blocks[h].insts {
        let (InstKind::Phi { entries }, Some(p)) =
            (&func.insts[inst].kind, func.insts[inst].result)
        else {
            continue;
        };
        if owned.contains(&p) || !matches!(func.values.get(p).map(|d| &d.ty), Some(Type::Array(_)))
        {
            continue;
        }
        let (outside, latches): (Vec<_>, Vec<_>) = entries
            .iter()
            .filter(|(b, _)| dom.is_reachable(*b))
            .partition(|(b, _)| !dom.dominates(h, *b));
        let [(_, entry @ Operand::Value(_))] = outside.as_slice() else {
            continue;
        };
        if latches.is_empty() || latches.iter().any(|(_, op)| op == entry) {
            continue;
        }
        cands.push((inst, p, *entry, latches.iter().map(|(_, op)| *op).collect()));
    }
    let mut out = Vec::new();
    let mut used: HashSet<Value> = HashSet::default();
    let body = loop_body(cfg, dom, h);
    let none: HashSet<Block> = HashSet::default();
    for (head_inst, head, _, latches) in &cands {
        let Some(from) = made(latches.iter(), makers, &HashMap::default()) else {
            continue;
        };
        // Down the chain: the one candidate each of whose latch entries is
        // the phi before it.
        let mut chain = vec![*head];
        let mut insts = vec![*head_inst];
        loop {
            let last = Operand::Value(chain[chain.len() - 1]);
            let takers: Vec<&(Inst, Value, Operand, Vec<Operand>)> = cands
                .iter()
                .filter(|c| c.3.iter().all(|op| *op == last))
                .collect();
            match takers.as_slice() {
                [t] if !chain.contains(&t.1) => {
                    chain.push(t.1);
                    insts.push(t.0);
                }
                _ => break,
            }
        }
        // A phi taken by another that is not its successor holds an array
        // two phis hold.
        let others_take = chain.iter().any(|&p| {
            cands
                .iter()
                .any(|c| !chain.contains(&c.1) && c.3.contains(&Operand::Value(p)))
        });
        if chain.len() < 2 || others_take || chain.iter().any(|p| used.contains(p)) {
            continue;
        }
        let mut pushed = false;
        let mut leaves = false;
        let mut ok = true;
        for (k, &p) in chain.iter().enumerate() {
            let next: &[Inst] = insts.get(k + 1).map_or(&[], std::slice::from_ref);
            let mut leaving = Leaving::default();
            match walk.reach(
                p,
                Some((h, dom)),
                Some((next, &none, &[])),
                Some((&mut leaving, &body)),
            ) {
                Some(was) => pushed |= was,
                None => {
                    ok = false;
                    break;
                }
            }
            leaves |= leaving.any();
        }
        if !ok {
            continue;
        }
        let head_entries = match &func.insts[*head_inst].kind {
            InstKind::Phi { entries } => entries.as_slice(),
            _ => continue,
        };
        let Some(handed) = hand_over(
            func,
            cfg,
            dom,
            walk,
            (*head_inst, h, head_entries),
            makers,
            &from,
        ) else {
            continue;
        };
        let letgo = if pushed || handed {
            Letgo::Release
        } else {
            Letgo::Free
        };
        used.extend(chain.iter().copied());
        let tail_first: Vec<Value> = chain.iter().rev().copied().collect();
        for (k, &p) in chain.iter().enumerate() {
            let entry = cands.iter().find(|c| c.1 == p).map(|c| c.2);
            out.push(Owner {
                phi: p,
                letgo,
                from: if k == 0 { from.clone() } else { Vec::new() },
                latch: entry.map(|e| (e, leaves)),
                into: Vec::new(),
                web: None,
                chain: (k == 0).then(|| tail_first.clone()),
                in_chain: true,
                either: None,
                quiet: false,
            });
        }
    }
    out
}

/// The sites among `ops` (operands of a phi), each once, when all are
/// sites of `makers`, or leaves of calls that hand back a site's array
/// passed to them (`handed_back`, "Handed back by a call"): that site.
fn made<'o>(
    ops: impl IntoIterator<Item = &'o Operand>,
    makers: &HashMap<Value, Block>,
    handed_back: &HashMap<Value, Value>,
) -> Option<Vec<Value>> {
    let mut from: Vec<Value> = Vec::new();
    for op in ops {
        let s = match op {
            Operand::Value(s) if makers.contains_key(s) => *s,
            Operand::Value(l)
                if let Some(&s) = handed_back.get(l)
                    && makers.contains_key(&s) =>
            {
                s
            }
            _ => return None,
        };
        if !from.contains(&s) {
            from.push(s);
        }
    }
    (!from.is_empty()).then_some(from)
}

/// Phi `p` (statement `inst` of block `h`, with `entries`) as an owning
/// phi, if it is one.
fn owning(
    func: &Func,
    (cfg, dom): (&ControlFlowGraph, &DominatorTree),
    walk: &mut Walk<'_>,
    makers: &HashMap<Value, Block>,
    (h, inst, p, entries): (Block, Inst, Value, &[(Block, Operand)]),
) -> Option<Owner> {
    let from = made(entries.iter().map(|(_, op)| op), makers, &walk.handed_back)?;
    let pushed = walk.stays_inside(p, Some((h, dom)), None)?;
    let handed = hand_over(func, cfg, dom, walk, (inst, h, entries), makers, &from)?;
    Some(Owner {
        phi: p,
        letgo: if pushed || handed {
            Letgo::Release
        } else {
            Letgo::Free
        },
        from,
        latch: None,
        into: Vec::new(),
        web: None,
        chain: None,
        in_chain: false,
        either: None,
        quiet: false,
    })
}

/// Phi `p` (statement `inst` of block `h`, with `entries`) as a
/// latch-owning phi, if it is one.
fn latch_owning(
    func: &Func,
    (cfg, dom): (&ControlFlowGraph, &DominatorTree),
    walk: &mut Walk<'_>,
    makers: &HashMap<Value, Block>,
    (h, inst, p, entries): (Block, Inst, Value, &[(Block, Operand)]),
) -> Option<Owner> {
    let (outside, latches): (Vec<_>, Vec<_>) = entries
        .iter()
        .filter(|(b, _)| dom.is_reachable(*b))
        .partition(|(b, _)| !dom.dominates(h, *b));
    let [(_, entry)] = outside.as_slice() else {
        return None;
    };
    if !matches!(entry, Operand::Value(_)) || latches.iter().any(|(_, op)| op == entry) {
        return None;
    }
    let from = made(latches.iter().map(|(_, op)| op), makers, &walk.handed_back)?;
    let body = loop_body(cfg, dom, h);
    // Pushed as it is, it counts its reference only when it holds an array
    // of its own (not the one it was entered with).
    let (pushed, leaving) = walk.stays_in_loop(p, (h, &body), dom)?;
    let handed = hand_over(func, cfg, dom, walk, (inst, h, entries), makers, &from)?;
    Some(Owner {
        phi: p,
        letgo: if pushed || handed {
            Letgo::Release
        } else {
            Letgo::Free
        },
        from,
        latch: Some((*entry, leaving.any())),
        into: if leaving.left {
            Vec::new()
        } else {
            leaving.into.iter().map(|&(q, _)| q).collect()
        },
        web: None,
        chain: None,
        in_chain: false,
        either: None,
        quiet: !pushed,
    })
}

/// A call of an either function ("Either results"): `r = invoke @f(..)`
/// passing `arg` to the parameter `@f` may return.
#[derive(Copy, Clone, Debug)]
struct EitherCall {
    inst: Inst,
    block: Block,
    /// The position of the parameter `@f` may return.
    param: usize,
    /// The value passed there.
    arg: Value,
    /// Whether `@f` may have pushed an array it made and returns (counted).
    pushed: bool,
    /// Whether `@f` pushes the parameter as it is (counted when passed a
    /// tagged word).
    param_pushed: bool,
    /// Whether `@f` always hands back the array passed there.
    only_param: bool,
}

/// The calls of either functions of `func` in reachable blocks, by result.
fn either_calls(
    func: &Func,
    (dom, uses): (&DominatorTree, &Uses),
    summaries: &Summaries,
) -> HashMap<Value, EitherCall> {
    let mut out = HashMap::default();
    for &block in &func.layout {
        if !dom.is_reachable(block) {
            continue;
        }
        for &inst in &func.blocks[block].insts {
            let data = &func.insts[inst];
            let (InstKind::Invoke { func: callee, args }, Some(r)) = (&data.kind, data.result)
            else {
                continue;
            };
            // The result itself, or the one `getfield` of each array leaf
            // of a tuple taken by chains of `getfield`s in this block (the
            // tuple used only by them).
            let leaves = match func.values.get(r).map(|d| &d.ty) {
                Some(Type::Array(_)) => vec![(Vec::new(), r)],
                Some(Type::Tuple(_)) => fresh::leaf_fields(func, uses, (r, block))
                    .into_iter()
                    .filter(|(_, _, others)| others.is_empty())
                    .map(|(path, g, _)| (path, g))
                    .collect(),
                _ => Vec::new(),
            };
            for (path, v) in leaves {
                if let Some(e) = summaries.either(*callee, &path)
                    && let Some(&Operand::Value(arg)) = args.get(e.param)
                {
                    out.insert(
                        v,
                        EitherCall {
                            inst,
                            block,
                            param: e.param,
                            arg,
                            pushed: e.pushed,
                            param_pushed: e.param_pushed,
                            only_param: e.only_param,
                        },
                    );
                }
            }
        }
    }
    out
}

/// In a module passing tags, the phis of `func` that count every push of
/// themselves ([`Freed::counting`], "Entered with made arrays"), and the
/// either calls (`either`) whose callees push the parameter they may
/// return, added to [`Freed::passed`]: a site's walk may follow an array
/// passed there ([`Walk::either_passes`]), so the argument is passed as
/// the word a push of it would push.
fn either_passing(
    func: &Func,
    (cfg, dom): (&ControlFlowGraph, &DominatorTree),
    (either, sites): (&HashMap<Value, EitherCall>, &[(Value, Block)]),
    freed: &mut Freed,
) {
    let makers = makers(func, sites);
    freed.counting = counting_phis(func, (cfg, dom), either, &makers);
    for c in either.values() {
        if c.param_pushed {
            let ks = freed.passed.entry(c.inst).or_default();
            if !ks.contains(&c.param) {
                ks.push(c.param);
            }
        }
    }
}

/// The calls of `either` by statement and the position of the parameter
/// their callee may return, each with its leaf and whether the callee
/// pushes that parameter ([`Walk::either_leaf`]).
fn either_leaves(either: &HashMap<Value, EitherCall>) -> HashMap<(Inst, usize), (Value, bool)> {
    either
        .iter()
        .map(|(&v, c)| ((c.inst, c.param), (v, c.param_pushed)))
        .collect()
}

/// The phis shaped as either phis (entered from exactly one block outside
/// their loops, every latch entry the leaf of a call of an either function
/// passed the phi at the parameter it may return) whose entry holds only
/// arrays that sites of `makers` made or parameters of `func`
/// ([`made_only`]); their latch entries, those calls' leaves; and the
/// phis entered so whose every latch entry is one of those (a phi handed
/// such a phi's array: `prev = cur`): each with the parameters whose
/// arrays it may hold (module header, "Entered with made arrays").
fn counting_phis(
    func: &Func,
    (cfg, dom): (&ControlFlowGraph, &DominatorTree),
    either: &HashMap<Value, EitherCall>,
    makers: &HashMap<Value, Block>,
) -> HashMap<Value, Vec<Value>> {
    let mut out: HashMap<Value, Vec<Value>> = HashMap::default();
    let passed: HashSet<Value> = either.values().map(|c| c.arg).collect();
    // Each header phi entered from one block outside its loop, with the
    // parameters its entry may hold.
    let mut entered: Vec<EnteredPhi> = Vec::new();
    for &h in func.layout.iter().filter(|&&h| dom.is_reachable(h)) {
        for &i in &func.blocks[h].insts {
            let (InstKind::Phi { entries }, Some(phi)) =
                (&func.insts[i].kind, func.insts[i].result)
            else {
                continue;
            };
            if let Some(e) = entered_phi(func, dom, makers, (h, phi, entries)) {
                entered.push(e);
            }
        }
    }
    for e in &entered {
        if !passed.contains(&e.phi) {
            continue;
        }
        let body = loop_body(cfg, dom, e.header);
        let latched = e.latches.iter().all(|v| {
            either
                .get(v)
                .is_some_and(|c| c.arg == e.phi && body.contains(&c.block))
        });
        if latched {
            out.insert(e.phi, e.foreign.clone());
            // Its calls' leaves hold its array or one the call made: the
            // run's arena's too, or its parameters'.
            for v in &e.latches {
                out.insert(*v, e.foreign.clone());
            }
        }
    }
    // A phi handed only what counting phis hold holds those arrays or its
    // entry's.
    loop {
        let mut added = false;
        for e in &entered {
            if out.contains_key(&e.phi) || !e.latches.iter().all(|v| out.contains_key(v)) {
                continue;
            }
            let mut all = e.foreign.clone();
            for v in &e.latches {
                all.extend(out[v].iter().copied());
            }
            all.sort_unstable();
            all.dedup();
            out.insert(e.phi, all);
            added = true;
        }
        if !added {
            return out;
        }
    }
}

/// A header phi of type `[T]` entered from one block outside its loop
/// with a value holding only arrays sites made and parameters
/// ([`made_only`]), for [`counting_phis`].
struct EnteredPhi {
    phi: Value,
    header: Block,
    /// Its entries from the loop (at least one), all values.
    latches: Vec<Value>,
    /// The parameters its entry may hold.
    foreign: Vec<Value>,
}

/// Phi `phi` of block `h` with `entries` as an [`EnteredPhi`], if it is one.
fn entered_phi(
    func: &Func,
    dom: &DominatorTree,
    makers: &HashMap<Value, Block>,
    (h, phi, entries): (Block, Value, &[(Block, Operand)]),
) -> Option<EnteredPhi> {
    if !func
        .values
        .get(phi)
        .is_some_and(|d| matches!(d.ty, Type::Array(_)))
    {
        return None;
    }
    let (outside, latches): (Vec<_>, Vec<_>) = entries
        .iter()
        .filter(|(b, _)| dom.is_reachable(*b))
        .partition(|(b, _)| !dom.dominates(h, *b));
    let [(_, Operand::Value(e))] = outside.as_slice() else {
        return None;
    };
    let latches: Vec<Value> = latches
        .iter()
        .map(|(_, op)| match op {
            Operand::Value(v) => Some(*v),
            Operand::Const(_) => None,
        })
        .collect::<Option<_>>()?;
    if latches.is_empty() {
        return None;
    }
    let foreign = made_only(func, *e, makers)?;
    Some(EnteredPhi {
        phi,
        header: h,
        latches,
        foreign,
    })
}

/// The parameters whose arrays `e` may hold, when it holds only those and
/// arrays that sites of `makers` made: it is such a site's value, a
/// parameter, or a phi or `select` whose every entry or choice is such a
/// value, down to sites and parameters; else `None`.
fn made_only(func: &Func, e: Value, makers: &HashMap<Value, Block>) -> Option<Vec<Value>> {
    let mut seen: HashSet<Value> = HashSet::default();
    let mut work = vec![e];
    let mut foreign = Vec::new();
    while let Some(v) = work.pop() {
        if !seen.insert(v) || makers.contains_key(&v) {
            continue;
        }
        if func.params.contains(&v) {
            foreign.push(v);
            continue;
        }
        let ops: Vec<&Operand> = match func.def_kind(v)? {
            InstKind::Phi { entries } => entries.iter().map(|(_, op)| op).collect(),
            InstKind::Prim {
                prim: Prim::Select,
                args,
            } => args.iter().skip(1).collect(),
            _ => return None,
        };
        for op in ops {
            let Operand::Value(w) = op else {
                return None;
            };
            work.push(*w);
        }
    }
    foreign.sort_unstable();
    Some(foreign)
}

/// Phi `p` (statement `inst` of block `h`, with `entries`) as an either
/// phi (module header, "Either results"), if it is one: entered from
/// exactly one block outside its loop, with a value other than any latch
/// entry; every latch entry is the result of a call of an either function
/// passed `p` itself at the parameter it may return; every value `p`
/// reaches stays inside the loop but for uses after it, those calls'
/// passing of `p` aside; and each call's result, handed over as a site to
/// a latch-owning phi, enters no other phi and is never pushed (it may be
/// the array `p` was entered with).
fn either_owning(
    func: &Func,
    (cfg, dom): (&ControlFlowGraph, &DominatorTree),
    walk: &mut Walk<'_>,
    either: &HashMap<Value, EitherCall>,
    (h, inst, p, entries): (Block, Inst, Value, &[(Block, Operand)]),
) -> Option<Owner> {
    let (outside, latches): (Vec<_>, Vec<_>) = entries
        .iter()
        .filter(|(b, _)| dom.is_reachable(*b))
        .partition(|(b, _)| !dom.dominates(h, *b));
    let [(_, entry)] = outside.as_slice() else {
        return None;
    };
    if !matches!(entry, Operand::Value(_)) || latches.iter().any(|(_, op)| op == entry) {
        return None;
    }
    let mut calls: Vec<(Value, EitherCall)> = Vec::new();
    for (_, op) in &latches {
        let Operand::Value(v) = op else {
            return None;
        };
        let call = *either.get(v)?;
        if call.arg != p {
            return None;
        }
        if !calls.iter().any(|(w, _)| w == v) {
            calls.push((*v, call));
        }
    }
    if calls.is_empty() {
        return None;
    }
    let body = loop_body(cfg, dom, h);
    // `p` passed to the parameter the callee may return is followed as
    // the call's result, below, not as a parameter kept.
    walk.passthrough = Some(calls.iter().map(|(_, c)| (c.inst, c.param)).collect());
    let walked = walk.stays_in_loop(p, (h, &body), dom);
    walk.passthrough = None;
    let (pushed, mut leaving) = walked?;
    let mut born_pushed = false;
    for &(v, call) in &calls {
        // No other phi in the loop. One after it (an exit phi, `break`)
        // is a use after the loop, counted as `p`'s (below).
        let other_phi = walk.uses.by_value.get(&v).is_some_and(|us| {
            us.iter().any(|u| {
                matches!(u, Use::Inst(i, at) if *i != inst
                    && body.contains(at)
                    && matches!(func.insts[*i].kind, InstKind::Phi { .. }))
            })
        });
        if other_phi || !body.contains(&call.block) {
            return None;
        }
        let after = unrepeated(cfg, h, call.block);
        if entries
            .iter()
            .any(|(pred, op)| *op == Operand::Value(v) && after.contains(pred))
        {
            return None;
        }
        // A push of the result counts a reference only when it is not the
        // array `p` was entered with (`Freed::either_results`), as a push
        // of `p` does. Its uses after the loop count as `p`'s (it may be
        // the array the slot holds).
        let handover: (&[Inst], _, &[Inst]) = (&[inst], &after, &[]);
        let site = Some((call.block, dom));
        born_pushed |= walk.reach(v, site, Some(handover), Some((&mut leaving, &body)))?;
        born_pushed |= call.pushed;
    }
    // A callee pushing the parameter `p` is passed at pushes it as it is:
    // counted only when passed the word a push of `p` would push
    // ("Pushed parameters": tagged while `p` holds an array of its own).
    let passed: Vec<(Inst, usize)> = calls
        .iter()
        .filter(|(_, c)| c.param_pushed)
        .map(|(_, c)| (c.inst, c.param))
        .collect();
    if !passed.is_empty() && !walk.tags {
        return None;
    }
    // Leaving only into phis after the loop that are only read: dead at
    // the return, and at the next entry from outside when no use may come
    // before those phis are defined again ("Exit phis of either phis").
    let read = match leaving.left {
        false if !leaving.into.is_empty() => walk.read_after((h, &body, cfg), &leaving.into),
        _ => None,
    };
    let (leaves, at_return) = match read {
        _ if !leaving.any() => (false, false),
        Some(true) => (false, false),
        Some(false) => (true, true),
        None => (true, false),
    };
    Some(Owner {
        phi: p,
        letgo: if pushed || born_pushed || !passed.is_empty() {
            Letgo::Release
        } else {
            Letgo::Free
        },
        from: calls.iter().map(|&(v, _)| v).collect(),
        latch: Some((*entry, leaves)),
        into: Vec::new(),
        web: None,
        chain: None,
        in_chain: false,
        either: Some((passed, at_return)),
        quiet: false,
    })
}

/// Phi `p` (statement `inst` of block `h`, with `entries`) as a choosing
/// phi (module header, "Choosing phis"), if it is one: entered from one
/// block outside its loop, every block entering `h` ends with `goto h`
/// (the lowering lets go on those edges), and its latch brings, through
/// phis of the loop's body (`phis`: every `[T]` phi, with its statement
/// and block), only `p` itself and sites of `makers` of the body; none of
/// those sites or phis is on a cycle of the body that does not pass `h`;
/// every value `p` or a web phi reaches stays inside the loop but for uses
/// after it (no web phi but `p` pushed as it is), and every value a site
/// reaches stays inside the function, but for the web's phis and uses
/// after the loop, and is not used where `h` leads before the site runs
/// again.
fn choosing(
    func: &Func,
    (cfg, dom): (&ControlFlowGraph, &DominatorTree),
    walk: &mut Walk<'_>,
    (makers, phis): (&HashMap<Value, Block>, &ArrayPhis),
    (h, inst, p, entries): (Block, Inst, Value, &[(Block, Operand)]),
) -> Option<Owner> {
    let (outside, latches): (Vec<_>, Vec<_>) = entries
        .iter()
        .filter(|(b, _)| dom.is_reachable(*b))
        .partition(|(b, _)| !dom.dominates(h, *b));
    let &[&(pre, entry)] = outside.as_slice() else {
        return None;
    };
    if !matches!(entry, Operand::Value(_)) {
        return None;
    }
    // Every edge into the header is a `goto` (so the lowering has an edge
    // of its own to let go on), and each is an entry of `p`.
    let preds = cfg.preds(h);
    if preds.len() != outside.len() + latches.len()
        || preds.iter().any(|&b| {
            !entries.iter().any(|(e, _)| *e == b)
                || func.blocks[b].term != Some(Terminator::Goto(h))
        })
    {
        return None;
    }
    let body = loop_body(cfg, dom, h);
    // The web: the phis of the body the latch brings, through phis, and the
    // sites they take; no header phi but `p` itself.
    let latch_ops: Vec<Operand> = latches.iter().map(|(_, op)| *op).collect();
    let only_p: HashSet<Value> = std::iter::once(p).collect();
    let sharing::Brings {
        phis: web, sites, ..
    } = sharing::brought(func, dom, (makers, phis), (h, &body), &only_p, &latch_ops)?;
    if web.is_empty() || sites.is_empty() || any_repeats(cfg, h, (&web, &sites), makers) {
        return None;
    }
    let insts: Vec<Inst> = web.iter().map(|&(i, _, _)| i).chain([inst]).collect();
    let none: HashSet<Block> = HashSet::default();
    let mut leaves = Leaving::default();
    let pushed = walk.reach(
        p,
        Some((h, dom)),
        Some((&insts, &none, &[])),
        Some((&mut leaves, &body)),
    )?;
    for &(_, q, _) in &web {
        if walk.reach(
            q,
            Some((h, dom)),
            Some((&insts, &none, &[])),
            Some((&mut leaves, &body)),
        )? {
            return None;
        }
    }
    let mut handed = false;
    for &s in &sites {
        let b = makers[&s];
        let after = unrepeated(cfg, h, b);
        handed |= walk.reach(
            s,
            Some((b, dom)),
            Some((&insts, &after, &[])),
            Some((&mut leaves, &body)),
        )?;
    }
    Some(Owner {
        phi: p,
        letgo: if pushed || handed {
            Letgo::Release
        } else {
            Letgo::Free
        },
        from: Vec::new(),
        latch: Some((entry, leaves.any())),
        // The phis after the loop it enters as it is, when that is the
        // only way its arrays leave ("Choosing phis leaving into quiet
        // ones").
        into: if leaves.left {
            Vec::new()
        } else {
            leaves.into.iter().map(|&(q, _)| q).collect()
        },
        chain: None,
        in_chain: false,
        either: None,
        quiet: !pushed,
        web: Some(Web {
            phi: p,
            inst,
            header: h,
            outside: pre,
            sites,
            others: Vec::new(),
            body: Vec::new(),
            leaves: leaves.any(),
            shared: false,
        }),
    })
}

/// Every phi of type `[T]` of a function's reachable blocks, with its
/// statement and block.
type ArrayPhis = HashMap<Value, (Inst, Block)>;

/// Whether a web's phi (`web`: statement, value, block) or site may run
/// twice between two entries of header `h`.
fn any_repeats(
    cfg: &ControlFlowGraph,
    h: Block,
    (web, sites): (&[(Inst, Value, Block)], &[Value]),
    makers: &HashMap<Value, Block>,
) -> bool {
    web.iter()
        .map(|&(_, _, b)| b)
        .chain(sites.iter().map(|s| makers[s]))
        .any(|b| repeats(cfg, h, b))
}

/// Whether block `b` of the loop of header `h` may run twice between two
/// entries of `h`: it is on a cycle that does not pass `h` (a loop inside).
fn repeats(cfg: &ControlFlowGraph, h: Block, b: Block) -> bool {
    if b == h {
        return false;
    }
    let mut seen: HashSet<Block> = HashSet::default();
    let mut work: Vec<Block> = cfg.succs(b).to_vec();
    while let Some(x) = work.pop() {
        if x == b {
            return true;
        }
        if x != h && seen.insert(x) {
            work.extend(cfg.succs(x).iter().copied());
        }
    }
    false
}

/// The sites of `sites` that make arrays (not pops), with their blocks.
fn makers(func: &Func, sites: &[(Value, Block)]) -> HashMap<Value, Block> {
    sites
        .iter()
        .filter(|(a, _)| {
            !matches!(
                func.def_kind(*a),
                Some(InstKind::Prim {
                    prim: Prim::Pop,
                    ..
                })
            )
        })
        .copied()
        .collect()
}

/// Whether the sites `from` (of `makers`, each with its block) can be
/// handed over to the phi `inst` of block `h` with `entries`, and if so
/// whether one of them is pushed as it is: each is an operand of no other
/// phi (two would both let go of it), is not carried into the phi again
/// before it runs again (its array would be let go of while it is the
/// phi's new value), and reaches nothing that escapes, but through the
/// phi, nor is used before it runs again (`unrepeated`).
fn hand_over(
    func: &Func,
    cfg: &ControlFlowGraph,
    dom: &DominatorTree,
    walk: &mut Walk<'_>,
    (inst, h, entries): (Inst, Block, &[(Block, Operand)]),
    makers: &HashMap<Value, Block>,
    from: &[Value],
) -> Option<bool> {
    let mut pushed = false;
    let mut body: Option<HashSet<Block>> = None;
    for &s in from {
        let other_phis: Vec<(Inst, Block)> = walk.uses.by_value.get(&s).map_or(Vec::new(), |us| {
            us.iter()
                .filter_map(|u| match u {
                    Use::Inst(i, at)
                        if *i != inst && matches!(func.insts[*i].kind, InstKind::Phi { .. }) =>
                    {
                        Some((*i, *at))
                    }
                    _ => None,
                })
                .collect()
        });
        // Another phi may take `s` only after the loop, on edges leaving
        // it (`a = b; if done { break; }`): an array leaving so never
        // entered `p`, and stays (module header, "Exit phis").
        let b = *makers.get(&s)?;
        if !other_phis.is_empty() {
            let body = body.get_or_insert_with(|| loop_body(cfg, dom, h));
            if body.len() < 2 && !cfg.preds(h).contains(&h) {
                return None;
            }
            // Only a statement of the loop: one made before it enters `p`
            // and may leave by the exit phi too (the same array).
            if !body.contains(&b) || other_phis.iter().any(|(_, at)| body.contains(at)) {
                return None;
            }
        }
        let after = unrepeated(cfg, h, b);
        let holds_s = |op: &Operand| match op {
            Operand::Value(v) => *v == s || walk.handed_back.get(v) == Some(&s),
            _ => false,
        };
        if entries
            .iter()
            .any(|(pred, op)| holds_s(op) && after.contains(pred))
        {
            return None;
        }
        let exits: Vec<Inst> = other_phis.iter().map(|&(i, _)| i).collect();
        pushed |= walk.stays_inside(s, Some((b, dom)), Some((&[inst], &after, &exits)))?;
    }
    Some(pushed)
}

/// The blocks of the natural loop of header `h`: `h` and every block that
/// reaches one of its latches (predecessors `h` dominates) without
/// passing `h`.
fn loop_body(cfg: &ControlFlowGraph, dom: &DominatorTree, h: Block) -> HashSet<Block> {
    let mut body: HashSet<Block> = HashSet::default();
    body.insert(h);
    let mut work: Vec<Block> = cfg
        .preds(h)
        .iter()
        .copied()
        .filter(|&b| dom.dominates(h, b))
        .collect();
    while let Some(b) = work.pop() {
        if body.insert(b) {
            work.extend(cfg.preds(b).iter().copied());
        }
    }
    body
}

/// The blocks that a run entering `h` may reach before the statements of
/// block `b` run again: none when `b` is `h` (its statements run on every
/// entry), else those reachable from `h` without entering `b`.
fn unrepeated(cfg: &ControlFlowGraph, h: Block, b: Block) -> HashSet<Block> {
    let mut seen: HashSet<Block> = HashSet::default();
    if h == b {
        return seen;
    }
    let mut work = vec![h];
    seen.insert(h);
    while let Some(x) = work.pop() {
        for &y in cfg.succs(x) {
            if y != b && seen.insert(y) {
                work.push(y);
            }
        }
    }
    seen
}

/// The `push` statements of `func` whose operand is a site's value itself,
/// a site that makes arrays it may push ([`Letgo::Release`]) or a pop of
/// an array ([`Letgo::Drop`]), with that site's letgo: such a push stores
/// a tagged word and counts the tape's reference (module header).
pub(super) fn counted_pushes(func: &Func, freed: &Freed) -> HashMap<Inst, Letgo> {
    let counted = counted_values(freed);
    let mut out = HashMap::default();
    if counted.is_empty() && !freed.counted {
        return out;
    }
    for (i, data) in func.insts.iter() {
        if let InstKind::Prim {
            prim: Prim::Push,
            args,
        } = &data.kind
            && let Some(Operand::Value(v)) = args.first()
        {
            // A statement's own array that the function does not let go
            // of may be a fresh result its caller lets go of ("Fresh
            // results"): its pushes are counted all the same.
            match counted.get(v) {
                Some(&letgo) => {
                    out.insert(i, letgo);
                }
                None if freed.counted && (fresh::makes(func, *v) || freed.called.contains(v)) => {
                    out.insert(i, Letgo::Release);
                }
                None => {}
            }
        }
    }
    out
}

/// The arguments of `func`'s `invoke`s that pass a value to a parameter
/// its callee only pushes as it is (`Summaries::pushes`), by statement.
fn passed_to_pushers(func: &Func, summaries: &Summaries) -> HashMap<Inst, Vec<usize>> {
    func.insts
        .iter()
        .filter_map(|(i, d)| match &d.kind {
            InstKind::Invoke { func: callee, args } => {
                let ks: Vec<usize> = (0..args.len())
                    .filter(|&k| {
                        matches!(args[k], Operand::Value(_)) && summaries.pushes(*callee, k)
                    })
                    .collect();
                (!ks.is_empty()).then_some((i, ks))
            }
            _ => None,
        })
        .collect()
}

/// The arguments of `invoke`s that pass a site's own value, as it is, to
/// a parameter the callee only pushes (`Freed::passed`), by statement,
/// each with its position and that site's letgo: the argument is passed
/// as the word a push of it would push (tagged, or a dropped pop's word),
/// and the callee counts the tape's reference at each push of it (module
/// header, "Pushed parameters").
pub(super) fn tagged_args(func: &Func, freed: &Freed) -> HashMap<Inst, Vec<(usize, Letgo)>> {
    let counted = counted_values(freed);
    let mut out: HashMap<Inst, Vec<(usize, Letgo)>> = HashMap::default();
    for (&i, ks) in &freed.passed {
        let InstKind::Invoke { args, .. } = &func.insts[i].kind else {
            continue;
        };
        for &k in ks {
            // An either phi's call may be listed twice: for the phi, and
            // for what a site's walk follows through it.
            if let Some(Operand::Value(v)) = args.get(k)
                && let Some(&letgo) = counted.get(v)
                && !out
                    .get(&i)
                    .is_some_and(|ks| ks.iter().any(|&(j, _)| j == k))
            {
                out.entry(i).or_default().push((k, letgo));
            }
        }
    }
    out
}

/// The values whose pushes as they are count a reference, each with its
/// letgo: the sites and owning phis not freed (released, or dropped
/// pops), and the selects latch-owning phis are entered through.
fn counted_values(freed: &Freed) -> HashMap<Value, Letgo> {
    let mut counted: HashMap<Value, Letgo> = freed
        .sites
        .iter()
        .chain(&freed.handed)
        .filter(|(_, l)| *l != Letgo::Free)
        .copied()
        .collect();
    // A phi counting every push of itself (`Freed::counting`) releases
    // whatever it holds that it lets go of.
    for &p in freed.counting.keys() {
        counted.entry(p).or_insert(Letgo::Release);
    }
    // So do the pushed phis of a sharing web's body, when the web releases
    // ("Pushed body phis").
    for w in &freed.webs {
        if counted.get(&w.phi) == Some(&Letgo::Release) {
            for &b in &w.body {
                counted.entry(b).or_insert(Letgo::Release);
            }
        }
    }
    // So does a select a sharing web is entered through.
    for (&v, held) in &freed.web_entered {
        if !held.is_empty() {
            counted.entry(v).or_insert(Letgo::Release);
        }
    }
    // A select a latch-owning phi is entered through counts its pushes as
    // its site does.
    for (&v, s) in &freed.entered {
        if freed.through.contains_key(&v)
            && let Some(&Letgo::Release) = counted.get(s)
        {
            counted.entry(v).or_insert(Letgo::Release);
        }
    }
    counted
}

/// The functions `func` invokes.
fn callees(func: &Func) -> impl Iterator<Item = FuncId> + '_ {
    func.insts.values().filter_map(|d| match d.kind {
        InstKind::Invoke { func, .. } => Some(func),
        _ => None,
    })
}

/// Which parameters of `func` it may keep (see [`Summaries`]), given the
/// current summaries of its callees.
fn kept_params(func: &Func, summaries: &Summaries) -> Vec<bool> {
    let cfg = ControlFlowGraph::with_function(func);
    let dom = DominatorTree::with_cfg(&cfg);
    let uses = Uses::of(func, &dom);
    let mut walk = Walk::of_params(func, &uses, summaries, false);
    func.params
        .iter()
        .map(|&p| {
            func.values.get(p).is_some_and(|d| d.ty.holds_array())
                && walk.stays_inside(p, None, None).is_none()
        })
        .collect()
}

/// Whether a parameter of type `ty` may be passed tagged: a caller's
/// `[bool]` buffer may sit at an odd address (a C caller's `uint8_t *`),
/// so only arrays of 8-byte elements, whose addresses are even wherever
/// they come from, carry the bit.
fn taggable(ty: Option<&Type>) -> bool {
    matches!(ty, Some(Type::Array(Scalar::F64 | Scalar::I64)))
}

/// Which `[T]` parameters of `func` it keeps only by pushing them as they
/// are (module header, "Pushed parameters"), given the final summaries of
/// its callees' kept parameters and the current ones of their pushed
/// parameters: passing one as it is to a parameter its callee only pushes
/// is a push of it (the word it was passed is passed on); passing it to
/// any other parameter its callee keeps is keeping it.
fn pushed_params(func: &Func, summaries: &Summaries) -> Vec<bool> {
    let cfg = ControlFlowGraph::with_function(func);
    let dom = DominatorTree::with_cfg(&cfg);
    let uses = Uses::of(func, &dom);
    let mut walk = Walk::of_params(func, &uses, summaries, true);
    func.params
        .iter()
        .map(|&p| {
            taggable(func.values.get(p).map(|d| &d.ty))
                && walk.stays_inside(p, None, None) == Some(true)
        })
        .collect()
}

/// Whether `func` (a function as compiled: after inlining, fusion and
/// versioning) keeps each parameter the summary says it only pushes
/// (`pushed`) still only by pushing it as it is: the transforms keep a
/// push of a parameter a push of it and add no other use that keeps it
/// (module header, "Pushed parameters"). A check of that invariant.
pub(super) fn still_only_pushed(func: &Func, summaries: &Summaries, pushed: &[bool]) -> bool {
    let cfg = ControlFlowGraph::with_function(func);
    let dom = DominatorTree::with_cfg(&cfg);
    let uses = Uses::of(func, &dom);
    let mut walk = Walk::of_params(func, &uses, summaries, true);
    func.params
        .iter()
        .zip(pushed)
        .all(|(&p, &only)| !only || walk.stays_inside(p, None, None).is_some())
}

/// One use of a value: as an operand of a statement (in a block), or by a
/// block's terminator.
#[derive(Copy, Clone)]
enum Use {
    Inst(Inst, Block),
    Term(Block),
}

/// The uses, in reachable blocks, of every value that can hold an array.
struct Uses {
    by_value: HashMap<Value, Vec<Use>>,
}

impl Uses {
    fn of(func: &Func, dom: &DominatorTree) -> Uses {
        let mut by_value: HashMap<Value, Vec<Use>> = HashMap::default();
        let mut add = |op: &Operand, u: Use| {
            if let Operand::Value(v) = op
                && func.values.get(*v).is_some_and(|d| d.ty.holds_array())
            {
                by_value.entry(*v).or_default().push(u);
            }
        };
        for &b in &func.layout {
            if !dom.is_reachable(b) {
                continue;
            }
            let Some(data) = func.blocks.get(b) else {
                continue;
            };
            for &i in &data.insts {
                let u = Use::Inst(i, b);
                match func.insts.get(i).map(|d| &d.kind) {
                    Some(InstKind::Prim { args, .. } | InstKind::Invoke { args, .. }) => {
                        args.iter().for_each(|op| add(op, u));
                    }
                    Some(InstKind::CallValue { args, .. }) => {
                        args.iter().for_each(|op| add(op, u));
                    }
                    Some(InstKind::Phi { entries }) => {
                        entries.iter().for_each(|(_, op)| add(op, u));
                    }
                    None => {}
                }
            }
            match &data.term {
                Some(Terminator::Return(op)) => add(op, Use::Term(b)),
                Some(Terminator::GotoIfNot { cond: op, .. })
                | Some(Terminator::Switch { index: op, .. }) => add(op, Use::Term(b)),
                Some(Terminator::Goto(_)) | None => {}
            }
        }
        Uses { by_value }
    }
}

/// How the values a loop's phi reaches are used after the loop (uses that
/// keep no reference and pushes of the phi itself aside).
#[derive(Default)]
struct Leaving {
    /// Some other use: the last array may go on after the loop.
    left: bool,
    /// The phis after the loop the phi itself enters, as it is, each with
    /// its block.
    into: Vec<(Value, Block)>,
}

impl Leaving {
    /// Whether the last array may go on after the loop in any way.
    fn any(&self) -> bool {
        self.left || !self.into.is_empty()
    }
}

/// The search of the values an array reaches, over one function.
struct Walk<'a> {
    func: &'a Func,
    uses: &'a Uses,
    summaries: &'a Summaries,
    budget: usize,
    /// The latch-owning phis entered from outside their loops with a
    /// site's value, by phi: that site's walk counts the phi's pushes
    /// (`Freed::entered`).
    entered: HashMap<Value, Value>,
    /// The phis of handing chains, each with the sites its chain is
    /// entered with, and of sharing webs, each with the pops its web is
    /// entered with: those sites' walks count the phi's pushes
    /// (`Chain::entered`, `Freed::web_entered`).
    chain_entered: HashMap<Value, Vec<Value>>,
    /// The calls of fresh leaves whose callee may have pushed the array
    /// (counted): such a site counts as pushed, so it releases.
    born_pushed: HashSet<Value>,
    /// The later `getfield`s of the field a `getfield` call site takes,
    /// by site: values the site reaches from the start.
    aliases: HashMap<Value, Vec<Value>>,
    /// Whether a walk of a parameter (no site) admits pushes of the
    /// parameter itself as it is ("Pushed parameters": `pushed_params`).
    param_pushes: bool,
    /// Whether a value passed to a parameter its callee only pushes may be
    /// passed tagged, its pushes there counted: in a module whose tapes are
    /// counted, by a compiler that has compiled nothing uncounted ("Pushed
    /// parameters").
    tags: bool,
    /// During the walk of an either phi, the calls passing it to the
    /// parameter their callees may return, each with that parameter's
    /// position: that argument is not kept, the call's result being the
    /// phi's own latch entry ("Either results").
    passthrough: Option<Vec<(Inst, usize)>>,
    /// The calls of either functions, by statement and the position of
    /// the parameter their callee may return: the leaf that may hold what
    /// is passed there, and whether the callee pushes that parameter. A
    /// site's walk follows an array passed there to the leaf ("Entered
    /// with made arrays").
    either_leaf: HashMap<(Inst, usize), (Value, bool)>,
    /// The phis every push of which is counted (`Freed::counting`).
    counting: HashSet<Value>,
    /// The leaves of calls of either functions that always hand back the
    /// array passed at their parameter, each with that argument ("Handed
    /// back by a call"): a phi taking such a leaf takes the argument's
    /// array, so an owning phi may take the site passed there.
    handed_back: HashMap<Value, Value>,
}

impl<'a> Walk<'a> {
    /// A walk of `func`'s parameters, which are never sites.
    fn of_params(
        func: &'a Func,
        uses: &'a Uses,
        summaries: &'a Summaries,
        param_pushes: bool,
    ) -> Walk<'a> {
        Walk {
            func,
            uses,
            summaries,
            budget: BUDGET,
            entered: HashMap::default(),
            chain_entered: HashMap::default(),
            born_pushed: HashSet::default(),
            aliases: HashMap::default(),
            param_pushes,
            tags: false,
            passthrough: None,
            either_leaf: HashMap::default(),
            counting: HashSet::default(),
            handed_back: HashMap::default(),
        }
    }

    /// Whether, in the walk from `a` (a site's when `site`), a push of
    /// `v` as it is counts as `a`'s (a tagged word, or the word `a`'s pop
    /// read): `a` itself, a latch-owning phi entered with it
    /// (`Freed::entered`), or a handing chain's phi entered with it
    /// (`Chain::entered`); for a parameter's walk that admits its pushes,
    /// the parameter itself.
    fn counts_push(&self, v: Value, a: Value, site: bool) -> bool {
        if !site {
            return self.param_pushes && v == a;
        }
        v == a
            || self.entered.get(&v) == Some(&a)
            || self.chain_entered.get(&v).is_some_and(|s| s.contains(&a))
            || self.counting.contains(&v)
    }

    /// Whether `inst`, an `invoke` with `v` among its arguments, keeps no
    /// reference to `v` once it returns but by pushes that count as
    /// `a`'s (`counts_push`): each argument that is `v` goes to a
    /// parameter the callee does not keep, or to one it only pushes as it
    /// is, passed tagged (`tags`, "Pushed parameters"). `Some(true)` when
    /// one does the latter (a push of `v`), `None` when one may be kept.
    fn invoke_pushes(&self, inst: Inst, v: Value, a: Value, site: bool) -> Option<bool> {
        let InstKind::Invoke { func: callee, args } = &self.func.insts.get(inst)?.kind else {
            return None;
        };
        let mut pushed = false;
        for (k, op) in args.iter().enumerate() {
            if *op != Operand::Value(v)
                || !self.summaries.keeps(*callee, k)
                || self
                    .passthrough
                    .as_ref()
                    .is_some_and(|ps| ps.contains(&(inst, k)))
            {
                continue;
            }
            if self.passes_tagged(site)
                && self.summaries.pushes(*callee, k)
                && self.counts_push(v, a, site)
            {
                pushed = true;
            } else {
                return None;
            }
        }
        Some(pushed)
    }

    /// Whether passing a value to a parameter its callee only pushes may
    /// count as a push of it: in a site's walk when tags are passed
    /// (`tags`); in a parameter's walk that admits its pushes, for the
    /// parameter itself as it is (`counts_push`), whose word the lowering
    /// passes on as it was given ("Pushed parameters passed on").
    fn passes_tagged(&self, site: bool) -> bool {
        if site { self.tags } else { self.param_pushes }
    }

    /// [`Walk::invoke_pushes`] for a site's walk (`site`), where `v` passed
    /// to the parameter an either callee may return is not kept but
    /// followed to the call's leaf that may hold it ("Entered with made
    /// arrays"): with whether a push of `v` was met, those leaves. A
    /// callee pushing that parameter pushes `v`: admitted when such a push
    /// counts (`counts_push`, and tags passed), else `None`.
    fn either_passes(
        &self,
        inst: Inst,
        v: Value,
        a: Value,
        site: bool,
    ) -> Option<(bool, Vec<Value>)> {
        let InstKind::Invoke { args, .. } = &self.func.insts.get(inst)?.kind else {
            return None;
        };
        let mut leaves = Vec::new();
        let mut pushed = false;
        let own = |k: usize| {
            self.passthrough
                .as_ref()
                .is_some_and(|ps| ps.contains(&(inst, k)))
        };
        for (k, op) in args.iter().enumerate() {
            if *op != Operand::Value(v) || own(k) || !site {
                continue;
            }
            let Some(&(leaf, param_pushed)) = self.either_leaf.get(&(inst, k)) else {
                continue;
            };
            if param_pushed {
                if !(self.tags && self.counts_push(v, a, site)) {
                    return None;
                }
                pushed = true;
            }
            leaves.push(leaf);
        }
        if leaves.is_empty() {
            return Some((self.invoke_pushes(inst, v, a, site)?, leaves));
        }
        // The other arguments that are `v`, as `invoke_pushes` judges them.
        let InstKind::Invoke { func: callee, .. } = &self.func.insts.get(inst)?.kind else {
            return None;
        };
        for (k, op) in args.iter().enumerate() {
            if *op != Operand::Value(v)
                || own(k)
                || self.either_leaf.contains_key(&(inst, k))
                || !self.summaries.keeps(*callee, k)
            {
                continue;
            }
            if self.passes_tagged(site)
                && self.summaries.pushes(*callee, k)
                && self.counts_push(v, a, site)
            {
                pushed = true;
            } else {
                return None;
            }
        }
        Some((pushed, leaves))
    }

    /// Whether every value `a` reaches stays inside the function (module
    /// header), and if so whether `a` itself is pushed: `None` when one
    /// may leave it, else `Some(pushed)`. For a
    /// site, `site` is its block and the dominator tree: phis count only in
    /// blocks it strictly dominates. For a parameter (`None`) every phi
    /// counts: it is never freed, only kept or not.
    ///
    /// `handover`, for a site handed over to an owning phi: that phi's
    /// statement (a choosing phi's web: all its phis), a use that neither
    /// escapes nor is followed, and the blocks where no use may be (see
    /// [`unrepeated`]).
    fn stays_inside(
        &mut self,
        a: Value,
        site: Option<(Block, &DominatorTree)>,
        handover: Option<(&[Inst], &HashSet<Block>, &[Inst])>,
    ) -> Option<bool> {
        self.reach(a, site, handover, None)
    }

    /// Whether every value the value `p` of a phi of loop header `h` reaches
    /// stays inside the loop (`body`) but for uses after it (in blocks
    /// outside `body`: not followed), and if so whether `p` itself is pushed
    /// (as [`Walk::stays_inside`] says) and how it is used after it.
    fn stays_in_loop(
        &mut self,
        p: Value,
        (h, body): (Block, &HashSet<Block>),
        dom: &DominatorTree,
    ) -> Option<(bool, Leaving)> {
        let mut leaving = Leaving::default();
        let pushed = self.reach(p, Some((h, dom)), None, Some((&mut leaving, body)))?;
        Some((pushed, leaving))
    }

    /// Whether the arrays of an either phi of header `h`, leaving its loop
    /// (`body`) only as values entering the phis `into` after it (each
    /// with its block, [`Leaving::into`]), are dead once the function
    /// returns, and once `h` is entered again: `None` when a value those
    /// phis reach, through phis outside the loop, is used inside the loop
    /// or otherwise than by a use that keeps no reference (an element
    /// read, a copy's source, the bulk primitives) or by a parameter its
    /// callee does not keep; else `Some(true)` when no such use, nor edge
    /// carrying such a value into a phi, is in a block a run entering `h`
    /// may reach before the phi is defined again ([`unrepeated`]: after
    /// `h` is entered again every use sees a value defined since), and
    /// `Some(false)` when they are dead at the return only ("Exit phis of
    /// either phis").
    fn read_after(
        &mut self,
        (h, body, cfg): (Block, &HashSet<Block>, &ControlFlowGraph),
        into: &[(Value, Block)],
    ) -> Option<bool> {
        let func = self.func;
        let mut seen: HashSet<Value> = HashSet::default();
        let mut work: Vec<(Value, Block)> = into.to_vec();
        let mut reread = false;
        while let Some((x, b)) = work.pop() {
            if !seen.insert(x) {
                continue;
            }
            let before = unrepeated(cfg, h, b);
            for &u in self.uses.by_value.get(&x).map_or(&[][..], Vec::as_slice) {
                self.budget = self.budget.checked_sub(1)?;
                // Returned: may outlive the function.
                let Use::Inst(i, at) = u else {
                    return None;
                };
                if body.contains(&at) {
                    return None;
                }
                let data = func.insts.get(i)?;
                match &data.kind {
                    InstKind::Prim { prim, .. } if matches!(prim_use(*prim), PrimUse::Keeps) => {
                        reread |= before.contains(&at);
                    }
                    InstKind::Invoke { func: callee, args }
                        if args.iter().enumerate().all(|(k, op)| {
                            *op != Operand::Value(x) || !self.summaries.keeps(*callee, k)
                        }) =>
                    {
                        reread |= before.contains(&at);
                    }
                    // The phi reads `x` on the edges from its predecessors.
                    InstKind::Phi { entries } => {
                        reread |= entries
                            .iter()
                            .any(|(pred, op)| *op == Operand::Value(x) && before.contains(pred));
                        work.extend(data.result.map(|r| (r, at)));
                    }
                    _ => return None,
                }
            }
        }
        Some(!reread)
    }

    /// [`Walk::stays_inside`], and with `leaves` the uses outside the loop
    /// body it gives are neither followed nor escapes (noted in the
    /// [`Leaving`]).
    fn reach(
        &mut self,
        a: Value,
        site: Option<(Block, &DominatorTree)>,
        handover: Option<(&[Inst], &HashSet<Block>, &[Inst])>,
        mut leaves: Option<(&mut Leaving, &HashSet<Block>)>,
    ) -> Option<bool> {
        let func = self.func;
        let mut seen: HashSet<Value> = HashSet::default();
        let mut work = vec![a];
        let mut pushed = site.is_some() && self.born_pushed.contains(&a);
        seen.insert(a);
        if site.is_some() {
            for &g in self.aliases.get(&a).into_iter().flatten() {
                seen.insert(g);
                work.push(g);
            }
        }
        while let Some(v) = work.pop() {
            for &u in self.uses.by_value.get(&v).map_or(&[][..], Vec::as_slice) {
                if self.budget == 0 {
                    return None;
                }
                self.budget -= 1;
                let at = match u {
                    Use::Term(b) | Use::Inst(_, b) => b,
                };
                if let Some((left, body)) = leaves.as_mut()
                    && !body.contains(&at)
                {
                    // A use after the loop that keeps no reference (an
                    // element read, a copy's source) is done before the
                    // header is entered again or the function returns.
                    // So is a push of the phi itself, counted as one in
                    // the loop is.
                    let prim = match u {
                        Use::Inst(i, _) => match func.insts.get(i).map(|d| &d.kind) {
                            Some(InstKind::Prim { prim, .. }) => Some(prim_use(*prim)),
                            _ => None,
                        },
                        Use::Term(_) => None,
                    };
                    let passed = match u {
                        Use::Inst(i, _) if v == a && prim.is_none() => {
                            self.invoke_pushes(i, v, a, site.is_some())
                        }
                        _ => None,
                    };
                    match (prim, u) {
                        (Some(PrimUse::Keeps), _) => {}
                        (Some(PrimUse::Pushes), _) if v == a => pushed = true,
                        // Passed to a parameter its callee only pushes,
                        // tagged: a push of the phi itself.
                        (None, Use::Inst(..)) if passed == Some(true) => pushed = true,
                        // The phi itself entering a phi after the loop:
                        // noted, for the caller to judge (`Leaving::into`).
                        (None, Use::Inst(i, b)) if v == a => match func.insts.get(i) {
                            Some(d) if matches!(d.kind, InstKind::Phi { .. }) => {
                                left.into.extend(d.result.map(|r| (r, b)))
                            }
                            _ => left.left = true,
                        },
                        _ => left.left = true,
                    }
                    continue;
                }
                let (inst, block) = match u {
                    // Returned (a condition or index cannot hold an array).
                    Use::Term(_) => return None,
                    Use::Inst(i, b) => (i, b),
                };
                if let Some((phis, unrepeated, exits)) = handover {
                    if phis.contains(&inst) || (v == a && exits.contains(&inst)) {
                        continue;
                    }
                    if unrepeated.contains(&block) {
                        return None;
                    }
                }
                let data = func.insts.get(inst)?;
                let propagates = match &data.kind {
                    InstKind::Prim { prim, .. } => match prim_use(*prim) {
                        PrimUse::Keeps => false,
                        // A site's own value pushed as it is: the tape's
                        // reference is counted (a tagged word). Anything
                        // else pushed is an escape.
                        // So does a latch-owning phi entered with the
                        // site's array (`Freed::entered`), or a handing
                        // chain's phi entered with it (`counts_push`).
                        PrimUse::Pushes if self.counts_push(v, a, site.is_some()) => {
                            pushed = true;
                            false
                        }
                        PrimUse::Pushes => return None,
                        PrimUse::Propagates => true,
                        PrimUse::Escapes => return None,
                    },
                    InstKind::Phi { .. } => {
                        // A phi in a block the site does not strictly
                        // dominate may carry the array past the site's
                        // next run.
                        if let Some((site_block, dom)) = site
                            && (block == site_block || !dom.dominates(site_block, block))
                        {
                            return None;
                        }
                        true
                    }
                    // The callee keeps no reference to a parameter it
                    // neither returns, pushes nor passes on to be kept, so
                    // its result cannot hold the array either; one it only
                    // pushes as it is, passed tagged, is a push of `v`
                    // ("Pushed parameters").
                    InstKind::Invoke { .. } => {
                        let (was, leaves) = self.either_passes(inst, v, a, site.is_some())?;
                        pushed |= was;
                        for r in leaves {
                            if seen.insert(r) {
                                work.push(r);
                            }
                        }
                        false
                    }
                    InstKind::CallValue { .. } => return None,
                };
                if propagates
                    && let Some(r) = data.result
                    && func.values.get(r).is_some_and(|d| d.ty.holds_array())
                    && seen.insert(r)
                {
                    work.push(r);
                }
            }
        }
        Some(pushed)
    }
}

/// What a primitive does with an array operand.
enum PrimUse {
    /// Reads or writes its elements, keeps no reference.
    Keeps,
    /// `push`: the tape holds a reference, counted at run time.
    Pushes,
    /// Its result may be (or hold) the array.
    Propagates,
    /// Anything else: treated as keeping the array beyond the function.
    Escapes,
}

fn prim_use(p: Prim) -> PrimUse {
    use Prim::*;
    match p {
        p if p.keeps_no_reference() => PrimUse::Keeps,
        Push => PrimUse::Pushes,
        Tuple | Getfield | Dual | Primal | Tangent | Select => PrimUse::Propagates,
        _ => PrimUse::Escapes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A forward sweep's shape: the array and its shadow, each its
    /// parameter (pushed as it is) or a new array (the shadow pushed).
    const FWD_SWEEP: &str = "func @fwd(%a: [f64], %k: i64, %s: [f64]) -> ([f64], [f64]) {
#1:
  call push(%a)
  call push(%s)
  %c = call eq(%k, 0) :: bool
  gotoifnot %c, #3
#2:
  %b = call copy(%a) :: [f64]
  %z = call zeros(3) :: [f64]
  call push(%z)
  goto #4
#3:
  goto #4
#4:
  %r = phi [#2 => %b, #3 => %a] :: [f64]
  %q = phi [#2 => %z, #3 => %s] :: [f64]
  %t = call tuple(%r, %q) :: ([f64], [f64])
  return %t
}
";
    use irad_ir::text::parse_module;

    /// The names of the sites of `@f` in `src` that it lets go of, with
    /// `:release` or `:drop` after those not simply freed.
    /// The sites of `@f` in `src` and how each is let go of, the module's
    /// tapes counted (`Module::counted_tapes`, as under checkpointing).
    fn freed(src: &str) -> Vec<String> {
        freed_in(src, true)
    }

    /// The module of `src`, the summaries of its functions `names` (and
    /// their callees), and their ids in that order.
    fn summaries_of(src: &str, names: &[&str]) -> (Module, Summaries, Vec<FuncId>) {
        let m = parse_module(src).expect("parses");
        let mut sums = Summaries::default();
        let ids: Vec<FuncId> = names
            .iter()
            .map(|n| m.by_name(n).expect("function"))
            .collect();
        sums.ensure(&m, &ids);
        (m, sums, ids)
    }

    /// [`freed`], the module's tapes counted or not.
    fn freed_in(src: &str, counted: bool) -> Vec<String> {
        analysed(src, counted, |freed, name| {
            let way = |letgo| match letgo {
                Letgo::Free => "",
                Letgo::Release => ":release",
                Letgo::Drop => ":drop",
            };
            let sites = freed
                .sites
                .into_iter()
                .map(|(v, letgo)| format!("{}{}", name(v), way(letgo)));
            let handed = freed
                .handed
                .into_iter()
                .map(|(v, letgo)| format!("{}{}:handed", name(v), way(letgo)));
            sites.chain(handed).collect()
        })
    }

    /// What `@f` of `src` lets go of (its module's tapes counted or not),
    /// handed to `read` with a function naming `@f`'s values.
    fn analysed<R>(
        src: &str,
        counted: bool,
        read: impl FnOnce(Freed, &dyn Fn(Value) -> String) -> R,
    ) -> R {
        let mut m = parse_module(src).expect("parses");
        m.set_counted_tapes(counted);
        let f = m.get(m.by_name("f").expect("@f")).expect("func");
        let freed = freed_sites(f, &m, &mut Summaries::default());
        let name = |v: Value| f.values[v].name.as_deref().unwrap_or("?").to_string();
        read(freed, &name)
    }

    #[test]
    fn temporaries_of_a_loop_are_freed() {
        let src = "func @f(%x: f64, %n: i64) -> f64 {
#1:
  goto #2
#2:
  %i = phi [#1 => 0, #3 => %j] :: i64
  %s = phi [#1 => 0.0, #3 => %s2] :: f64
  %c = call lt(%i, %n) :: bool
  gotoifnot %c, #4
#3:
  %t = call zeros(10) :: [f64]
  %u = call copy(%t) :: [f64]
  %p = call tuple(%t, %x) :: ([f64], f64)
  %q = call getfield(%p, 0) :: [f64]
  call arrayset(%q, 0, %x)
  %v = call sum(%u) :: f64
  %s2 = call add(%s, %v) :: f64
  %j = call iadd(%i, 1) :: i64
  goto #2
#4:
  return %s
}
";
        assert_eq!(freed(src), ["t", "u"]);
    }

    #[test]
    fn calls_returning_fresh_arrays_are_sites() {
        // `@g` returns a new array; `@h` one in a tuple; `@rec` one made at
        // the base of its recursion; `@p` one it pushes (counted). `@id`
        // returns its argument, `@two` one array at two fields: not fresh.
        let src = "func @g(%n: i64) -> [f64] {
#1:
  %a = call zeros(%n) :: [f64]
  return %a
}
func @h(%n: i64) -> ([f64], f64) {
#1:
  %a = call zeros(%n) :: [f64]
  %t = call tuple(%a, 1.0) :: ([f64], f64)
  return %t
}
func @rec(%k: i64) -> [f64] {
#1:
  %c = call eq(%k, 0) :: bool
  gotoifnot %c, #3
#2:
  %a = call zeros(3) :: [f64]
  return %a
#3:
  %j = call isub(%k, 1) :: i64
  %b = invoke @rec(%j) :: [f64]
  return %b
}
func @p(%n: i64) -> [f64] {
#1:
  %a = call zeros(%n) :: [f64]
  call push(%a)
  return %a
}
func @id(%a: [f64]) -> [f64] {
#1:
  return %a
}
func @two(%n: i64) -> ([f64], [f64]) {
#1:
  %a = call zeros(%n) :: [f64]
  %t = call tuple(%a, %a) :: ([f64], [f64])
  return %t
}
func @f(%n: i64) -> f64 {
#1:
  %r = invoke @g(%n) :: [f64]
  %t = invoke @h(%n) :: ([f64], f64)
  %u = call getfield(%t, 0) :: [f64]
  %u2 = call getfield(%t, 0) :: [f64]
  %e = invoke @rec(%n) :: [f64]
  %q = invoke @p(%n) :: [f64]
  %z = call zeros(%n) :: [f64]
  %i = invoke @id(%z) :: [f64]
  %w = invoke @two(%n) :: ([f64], [f64])
  %w0 = call getfield(%w, 0) :: [f64]
  %w1 = call getfield(%w, 1) :: [f64]
  %x1 = call arrayref(%r, 0) :: f64
  %x2 = call arrayref(%u, 0) :: f64
  %x3 = call arrayref(%u2, 1) :: f64
  %x4 = call arrayref(%e, 0) :: f64
  %x5 = call arrayref(%q, 0) :: f64
  %x6 = call arrayref(%i, 0) :: f64
  %x7 = call arrayref(%w0, 0) :: f64
  %x8 = call arrayref(%w1, 0) :: f64
  return %x8
}
";
        // `u2` takes the field `u` takes: the same array, reached from `u`.
        // `@id` returns its parameter (an either leaf, not fresh): `z` is
        // followed to `i`, only read ("Through either calls").
        assert_eq!(freed(src), ["r", "u", "e", "q:release", "z"]);
        // Tapes not counted: `@p`'s push is an escape, so its array stays.
        assert_eq!(freed_in(src, false), ["r", "u", "e", "z"]);
    }

    #[test]
    fn no_caller_releases_what_a_callee_compiled_uncounted_pushed() {
        let src = "func @p(%n: i64) -> [f64] {
#1:
  %a = call zeros(%n) :: [f64]
  call push(%a)
  return %a
}
func @f(%n: i64) -> f64 {
#1:
  %q = invoke @p(%n) :: [f64]
  %x = call arrayref(%q, 0) :: f64
  return %x
}
";
        let mut m = parse_module(src).expect("parses");
        let f = m.by_name("f").expect("@f");
        let names = |freed: Freed, m: &Module| -> Vec<String> {
            let func = m.get(f).expect("func");
            freed
                .sites
                .iter()
                .map(|&(v, l)| format!("{}:{l:?}", func.values[v].name.as_deref().unwrap_or("?")))
                .collect()
        };
        let mut summaries = Summaries::default();
        let freed = freed_sites(m.get(f).expect("func"), &m, &mut summaries);
        assert!(names(freed, &m).is_empty());
        // The same compiler, the tapes now counted: `@p` may have been
        // compiled uncounted, its push not tagged, so `q` stays.
        m.set_counted_tapes(true);
        let freed = freed_sites(m.get(f).expect("func"), &m, &mut summaries);
        assert!(names(freed, &m).is_empty());
        // A compiler that compiled nothing uncounted releases it.
        let freed = freed_sites(m.get(f).expect("func"), &m, &mut Summaries::default());
        assert_eq!(names(freed, &m), ["q:Release"]);
    }

    #[test]
    fn escaping_arrays_are_kept() {
        // Returned through a tuple (`r`). `p` is pushed as it is: released
        // (the tape's reference counted). `c` is passed to `@g`, which only
        // reads it (the next test has callees that keep). `prev` owns what
        // `l` (from before the loop, used nowhere else) and `cur` (carried
        // to the next iteration) make: both are handed over to it, and it
        // lets go of its old array on each entry of `#2`.
        let src = "func @g(%a: [f64]) -> f64 {
#1:
  %r = call arrayref(%a, 0) :: f64
  return %r
}
func @f(%n: i64) -> ([f64], f64) {
#1:
  %r = call zeros(%n) :: [f64]
  %p = call zeros(%n) :: [f64]
  call push(%p)
  %c = call zeros(%n) :: [f64]
  %y = invoke @g(%c) :: f64
  %l = call zeros(%n) :: [f64]
  goto #2
#2:
  %prev = phi [#1 => %l, #3 => %cur] :: [f64]
  %k = phi [#1 => 0, #3 => %k2] :: i64
  %cur = call zeros(%n) :: [f64]
  %e = call lt(%k, %n) :: bool
  gotoifnot %e, #4
#3:
  %k2 = call iadd(%k, 1) :: i64
  goto #2
#4:
  %z = call arrayref(%prev, 0) :: f64
  %t = call tuple(%r, %z) :: ([f64], f64)
  return %t
}
";
        assert_eq!(
            freed(src),
            ["p:release", "c", "prev", "l:handed", "cur:handed"]
        );
        // Tapes not counted: a push is an escape.
        assert_eq!(
            freed_in(src, false),
            ["c", "prev", "l:handed", "cur:handed"]
        );
    }

    #[test]
    fn phis_own_only_arrays_nothing_else_may_still_use() {
        // `p` is entered with `a` again from the latch (letting go of its
        // old array would free its new one), `q` with the argument, and
        // `r` with `e`, which the body reads after the header, before `e`
        // runs again: none owns. `a` and `e`, made before the loop, reach
        // only phis their block strictly dominates: freed at the return.
        let src = "func @f(%n: i64, %x: [f64]) -> f64 {
#1:
  %a = call zeros(3) :: [f64]
  %e = call zeros(3) :: [f64]
  goto #2
#2:
  %p = phi [#1 => %a, #3 => %a] :: [f64]
  %q = phi [#1 => %x, #3 => %t] :: [f64]
  %r = phi [#1 => %e, #3 => %u] :: [f64]
  %i = phi [#1 => 0, #3 => %j] :: i64
  %c = call lt(%i, %n) :: bool
  gotoifnot %c, #4
#3:
  %t = call copy(%q) :: [f64]
  %u = call copy(%r) :: [f64]
  %y = call arrayref(%e, 0) :: f64
  %j = call iadd(%i, 1) :: i64
  goto #2
#4:
  %z = call arrayref(%p, 0) :: f64
  return %z
}
";
        // `q` and `r` still own what their latch brings (latch-owning
        // phis: `t` and `u`), never what they are entered with.
        assert_eq!(freed(src), ["a", "e", "q", "r", "t:handed", "u:handed"]);
        // Without the third phi's reader, `r` owns `e` and `u`.
        let owned = src.replace("  %y = call arrayref(%e, 0) :: f64\n", "");
        assert_eq!(
            freed(&owned),
            ["a", "q", "r", "t:handed", "e:handed", "u:handed"]
        );
    }

    #[test]
    fn an_array_entering_two_phis_is_owned_by_neither() {
        // `a` enters both `p` and `q`: were it handed to both, each would
        // let go of it. Neither owns (refused twice over: `a` enters a
        // second phi, and reaches through `q` a use in the body, which a
        // re-entry of the header reaches before `#1` runs again); `a`
        // itself, reaching only phis its block strictly dominates, is
        // freed at the return. `t` and `u`, which the latch brings, are
        // owned by `p` and `q` as latch-owning phis, which never let go of
        // what they are entered with from outside (`a`).
        let src = "func @f(%n: i64) -> f64 {
#1:
  %a = call zeros(3) :: [f64]
  goto #2
#2:
  %p = phi [#1 => %a, #3 => %t] :: [f64]
  %q = phi [#1 => %a, #3 => %u] :: [f64]
  %i = phi [#1 => 0, #3 => %j] :: i64
  %c = call lt(%i, %n) :: bool
  gotoifnot %c, #4
#3:
  %t = call copy(%p) :: [f64]
  %u = call copy(%q) :: [f64]
  %j = call iadd(%i, 1) :: i64
  goto #2
#4:
  %z = call arrayref(%p, 0) :: f64
  return %z
}
";
        assert_eq!(freed(src), ["a", "p", "q", "t:handed", "u:handed"]);
    }

    /// A loop whose header's phi is entered with the argument and with a
    /// copy of itself from its latch, read after the loop.
    const LATCH_LOOP: &str = "func @f(%n: i64, %x: [f64]) -> f64 {
#1:
  goto #2
#2:
  %p = phi [#1 => %x, #3 => %t] :: [f64]
  %i = phi [#1 => 0, #3 => %j] :: i64
  %c = call lt(%i, %n) :: bool
  gotoifnot %c, #4
#3:
  %t = call copy(%p) :: [f64]
  %j = call iadd(%i, 1) :: i64
  goto #2
#4:
  %z = call arrayref(%p, 0) :: f64
  return %z
}
";

    #[test]
    fn a_phi_owns_what_its_latch_brings_only_when_nothing_escapes_in_the_loop() {
        // `p` is entered with the argument and owns the copies its latch
        // brings (a latch-owning phi), read after the loop; pushed inside a
        // tuple in the loop, its array escapes there and it owns nothing
        // (`t`, reaching `p`'s block, is then kept too).
        let src = LATCH_LOOP;
        assert_eq!(freed(src), ["p", "t:handed"]);
        let pushed = src.replace(
            "  %j = call iadd(%i, 1) :: i64\n",
            "  %w = call tuple(%p, 1.0) :: ([f64], f64)\n  call push(%w)\n  %j = call iadd(%i, 1) :: i64\n",
        );
        assert_eq!(freed(&pushed), Vec::<String>::new());
        // Pushed as it is, it releases (counting only its own arrays).
        let itself = src.replace(
            "  %j = call iadd(%i, 1) :: i64\n",
            "  call push(%p)\n  %j = call iadd(%i, 1) :: i64\n",
        );
        assert_eq!(freed(&itself), ["p:release", "t:release:handed"]);
        // Uncounted tapes: a push is an escape.
        assert_eq!(freed_in(&itself, false), Vec::<String>::new());
    }

    /// The latch-owning phis of `@f` in `src` (tapes counted), each with
    /// whether its arrays may leave its loop and `:entered` when it is
    /// entered with a site's array (`Freed::entered`).
    fn latch_phis(src: &str) -> Vec<String> {
        analysed(src, true, |freed, name| {
            freed
                .latch
                .iter()
                .map(|&(p, (_, leaves))| {
                    format!(
                        "{}{}{}{}",
                        name(p),
                        if leaves { ":leaves" } else { "" },
                        if freed.entered.contains_key(&p) {
                            ":entered"
                        } else {
                            ""
                        },
                        if freed.at_return.contains(&p) {
                            ":at_return"
                        } else {
                            ""
                        }
                    )
                })
                .collect()
        })
    }

    #[test]
    fn a_latch_owning_phi_read_or_pushed_after_its_loop_lets_go_at_the_return() {
        // `p`'s last array is only read after the loop (a copy's source, an
        // element): let go of at the return. Pushed as it is after the
        // loop: counted, let go of too. Put in a tuple after the loop: it
        // may go on, never let go of.
        let src = &LATCH_LOOP.replace(
            "  %z = call arrayref(%p, 0) :: f64\n",
            "  %y = call copy(%p) :: [f64]\n  %z = call arrayref(%y, 0) :: f64\n",
        );
        assert_eq!(latch_phis(src), ["p"]);
        let pushed = src.replace(
            "  %y = call copy(%p) :: [f64]
",
            "  call push(%p)
  %y = call copy(%p) :: [f64]
",
        );
        assert_eq!(latch_phis(&pushed), ["p"]);
        assert_eq!(freed(&pushed), ["y", "p:release", "t:release:handed"]);
        let tupled = src.replace(
            "  %y = call copy(%p) :: [f64]
",
            "  %w = call tuple(%p, 1.0) :: ([f64], f64)
  %y = call getfield(%w, 0) :: [f64]
",
        );
        assert_eq!(latch_phis(&tupled), ["p:leaves"]);
    }

    #[test]
    fn an_array_leaving_its_loop_by_an_exit_phi_is_handed_over_all_the_same() {
        // `a = b; if done { break; }`: `b` enters the header's `p` and the
        // phi `q` after the loop, on the `break` edge: `p` owns the arrays
        // that come round (the one that leaves never entered it, and
        // stays). A phi inside the loop taking `b` as well (`r`) forbids
        // it, as before, and `b` is kept.
        let src = "func @f(%n: i64, %x: [f64]) -> f64 {
#1:
  %a = call copy(%x) :: [f64]
  goto #2
#2:
  %p = phi [#1 => %a, #5 => %b] :: [f64]
  %i = phi [#1 => 0, #5 => %j] :: i64
  %c = call lt(%i, %n) :: bool
  gotoifnot %c, #6
#3:
  %b = call copy(%p) :: [f64]
  %z = call arrayref(%b, 0) :: f64
  %d = call gt(%z, 9.0) :: bool
  gotoifnot %d, #5
#4:
  goto #6
#5:
  %j = call iadd(%i, 1) :: i64
  goto #2
#6:
  %q = phi [#2 => %p, #4 => %b] :: [f64]
  %y = call arrayref(%q, 0) :: f64
  return %y
}
";
        assert_eq!(freed(src), ["p", "a:handed", "b:handed"]);
        let inside = src
            .replace(
                "  %j = call iadd(%i, 1) :: i64\n  goto #2\n",
                "  %r = phi [#3 => %b] :: [f64]\n  %w = call arrayref(%r, 0) :: f64\n  %j = call iadd(%i, 1) :: i64\n  goto #2\n",
            );
        // (`a` is then freed at the return, as any site.)
        assert_eq!(freed(&inside), ["a"]);
        // Found by review: `a`, made before the loop, also leaving by the
        // phi after it (on the header's exit edge, or as the `break`'s
        // value) is the array `p` lets go of at the second entry: not
        // handed over (`a` is freed at the return), and `p` owns only what
        // its latch brings.
        let before = src.replace("#4 => %b]", "#4 => %a]");
        assert_eq!(freed(&before), ["a", "p", "b:handed"]);
        assert_eq!(latch_phis(&before), ["p:leaves:entered"]);
    }

    #[test]
    fn a_latch_owning_phi_entered_with_a_sites_array_counts_its_pushes() {
        // `e`, made before the loop and read after it (so `p` does not own
        // it), enters `p`, which is pushed in the loop and after it: every
        // push of `p` is counted, so `e` is released. Entered with the
        // argument instead, `p` counts only its own arrays.
        let src = "func @f(%n: i64, %x: [f64]) -> f64 {
#1:
  %k = call length(%x) :: i64
  %e = call zeros(%k) :: [f64]
  call push(%e)
  goto #2
#2:
  %p = phi [#1 => %e, #3 => %t] :: [f64]
  %i = phi [#1 => 0, #3 => %j] :: i64
  %c = call lt(%i, %n) :: bool
  gotoifnot %c, #4
#3:
  call push(%p)
  %t = call zeros(%k) :: [f64]
  call push(%t)
  %j = call iadd(%i, 1) :: i64
  goto #2
#4:
  call push(%p)
  %r = call arrayref(%e, 0) :: f64
  return %r
}
";
        assert_eq!(latch_phis(src), ["p:entered"]);
        assert_eq!(freed(src), ["e:release", "p:release", "t:release:handed"]);
        let argument = src.replace("#1 => %e,", "#1 => %x,");
        assert_eq!(latch_phis(&argument), ["p"]);
        // `e` is then pushed once, as it is.
        assert_eq!(
            freed(&argument),
            ["e:release", "p:release", "t:release:handed"]
        );
    }

    #[test]
    fn a_latch_owning_phi_leaving_into_a_counting_phi_lets_go_at_the_return() {
        // A replay's split loop (`p`, entered with the copy `e` it starts
        // from) hands its last array to the recording loop (`q`, entered
        // with `p`), which pushes it: `q` counts its pushes and lets go of
        // nothing it is entered with, so `p` lets go of its last array at
        // the return (it leaked one per replay before).
        let src = "func @f(%n: i64, %x: [f64]) -> f64 {
#1:
  %e = call copy(%x) :: [f64]
  goto #2
#2:
  %p = phi [#1 => %e, #3 => %t] :: [f64]
  %i = phi [#1 => 0, #3 => %j] :: i64
  %c = call lt(%i, %n) :: bool
  gotoifnot %c, #4
#3:
  call push(%p)
  %t = call copy(%p) :: [f64]
  %j = call iadd(%i, 1) :: i64
  goto #2
#4:
  %k = call length(%p) :: i64
  goto #5
#5:
  %q = phi [#4 => %p, #6 => %u] :: [f64]
  %l = phi [#4 => 0, #6 => %m] :: i64
  %d = call lt(%l, %n) :: bool
  gotoifnot %d, #7
#6:
  call push(%q)
  %u = call copy(%q) :: [f64]
  %m = call iadd(%l, 1) :: i64
  goto #5
#7:
  call push(%q)
  %r = call arrayref(%q, 0) :: f64
  return %r
}
";
        assert_eq!(latch_phis(src), ["p:leaves:entered:at_return", "q:entered"]);
        // Entered with the argument, neither counts its pushes of the
        // array it is entered with: `p`'s last array stays.
        let argument = src.replace("#1 => %e,", "#1 => %x,");
        assert_eq!(latch_phis(&argument), ["p:leaves", "q"]);
        // `q`'s arrays leave its loop (in a tuple pushed after it): `p`'s
        // last array may be among them.
        let tupled = src.replace(
            "  call push(%q)\n  %r",
            "  %z = call tuple(%q) :: ([f64],)\n  call push(%z)\n  %r",
        );
        assert_eq!(
            latch_phis(&tupled),
            ["p:leaves:entered", "q:leaves:entered"]
        );
        // `p` itself used after its loop in another way.
        let kept = src.replace(
            "  %k = call length(%p) :: i64",
            "  %k = call length(%p) :: i64\n  %z = call tuple(%p) :: ([f64],)\n  call push(%z)",
        );
        assert_eq!(latch_phis(&kept), ["p:leaves:entered", "q:entered"]);
    }

    #[test]
    fn a_latch_owning_phi_entered_with_a_pop_counts_its_pushes_and_the_pop_lets_go() {
        // A replay: the snapshot's array `e` is popped and enters the loop
        // (`p`), which pushes it: every push of `p` is counted (the pop's
        // word while it holds `e`), so the pop is dropped (it lets go of
        // the tape's reference at the return). Entered with the argument,
        // `p` counts only its own arrays.
        let src = "func @f(%n: i64, %x: [f64]) -> f64 {
#1:
  %e = call pop() :: [f64]
  goto #2
#2:
  %p = phi [#1 => %e, #3 => %t] :: [f64]
  %i = phi [#1 => 0, #3 => %j] :: i64
  %c = call lt(%i, %n) :: bool
  gotoifnot %c, #4
#3:
  call push(%p)
  %t = call copy(%p) :: [f64]
  %j = call iadd(%i, 1) :: i64
  goto #2
#4:
  call push(%p)
  %r = call arrayref(%p, 0) :: f64
  return %r
}
";
        assert_eq!(latch_phis(src), ["p:entered"]);
        assert_eq!(freed(src), ["e:drop", "p:release", "t:release:handed"]);
        // Another push of what the pop reaches, other than through `p`:
        // the pop keeps its reference, and `p` counts nothing it was
        // entered with.
        let tupled = src.replace(
            "  goto #2\n#2:",
            "  %z = call tuple(%e) :: ([f64],)\n  call push(%z)\n  goto #2\n#2:",
        );
        assert_eq!(latch_phis(&tupled), ["p"]);
        assert_eq!(freed(&tupled), ["p:release", "t:release:handed"]);
        let argument = src.replace("#1 => %e,", "#1 => %x,");
        assert_eq!(latch_phis(&argument), ["p"]);
    }

    /// The handing chains of `@f` in `src` (counted tapes), each as its
    /// phis tail first, `tail<-...<-head`, then `:` and what its pushes
    /// count (`e/s` for an entry `e` counted for site `s`).
    fn chains(src: &str) -> Vec<String> {
        analysed(src, true, |freed, name| {
            freed
                .chains
                .iter()
                .map(|c| {
                    let phis: Vec<String> = c.phis.iter().map(|&p| name(p)).collect();
                    let entered: Vec<String> = c
                        .entered
                        .iter()
                        .map(|&(e, s, _)| format!("{}/{}", name(e), name(s)))
                        .collect();
                    format!("{}:{}", phis.join("<-"), entered.join(","))
                })
                .collect()
        })
    }

    const CHAIN_LOOP: &str = "func @f(%n: i64, %x: [f64]) -> f64 {
#1:
  %a0 = call copy(%x) :: [f64]
  %b0 = call copy(%x) :: [f64]
  goto #2
#2:
  %a = phi [#1 => %a0, #3 => %b] :: [f64]
  %b = phi [#1 => %b0, #3 => %c] :: [f64]
  %i = phi [#1 => 0, #3 => %j] :: i64
  %t = call lt(%i, %n) :: bool
  gotoifnot %t, #4
#3:
  %c = call copy(%b) :: [f64]
  %u = call arrayref(%a, 0) :: f64
  call arrayset(%c, 0, %u)
  call push(%a)
  %j = call iadd(%i, 1) :: i64
  goto #2
#4:
  %r = call arrayref(%b, 0) :: f64
  return %r
}
";

    #[test]
    fn a_handing_chain_lets_go_of_the_array_leaving_its_tail() {
        // `a = b; b = c;` with `c` made in the loop: each array enters `b`,
        // moves to `a` and dies when `a` takes the next; `a` is pushed, so
        // the chain releases, and counts the pushes of the copies it is
        // entered with, which are released too.
        assert_eq!(chains(CHAIN_LOOP), ["a<-b:a0/a0,b0/b0"]);
        assert_eq!(
            freed(CHAIN_LOOP),
            [
                "a0:release",
                "b0:release",
                "b:release",
                "a:release",
                "c:release:handed"
            ]
        );
        // Entered with the argument: nothing to count for it.
        let argument = CHAIN_LOOP.replace("#1 => %a0,", "#1 => %x,");
        assert_eq!(chains(&argument), ["a<-b:b0/b0"]);
        // Three phis: `a = b; b = d; d = c;`.
        let three = CHAIN_LOOP.replace(
            "  %b = phi [#1 => %b0, #3 => %c] :: [f64]",
            "  %b = phi [#1 => %b0, #3 => %d] :: [f64]\n  %d = phi [#1 => %b0, #3 => %c] :: [f64]",
        );
        assert_eq!(chains(&three), ["a<-b<-d:a0/a0,b0/b0"]);
    }

    #[test]
    fn a_handing_chain_refuses_arrays_two_phis_may_hold() {
        // `b` handed to two phis: both would hold one array.
        let twice = CHAIN_LOOP.replace(
            "  %i = phi [#1 => 0, #3 => %j] :: i64",
            "  %e = phi [#1 => %a0, #3 => %b] :: [f64]\n  %i = phi [#1 => 0, #3 => %j] :: i64",
        );
        assert!(chains(&twice).is_empty());
        // The tail's array leaves in a tuple pushed in the loop.
        let tupled = CHAIN_LOOP.replace(
            "  call push(%a)",
            "  %z = call tuple(%a) :: ([f64],)\n  call push(%z)",
        );
        assert!(chains(&tupled).is_empty());
        // The head's site is also read after the next one is made: the
        // array is used while `b` still holds it... it is not handed over.
        let swapped = CHAIN_LOOP.replace("#3 => %c] :: [f64]", "#3 => %a] :: [f64]");
        assert!(chains(&swapped).is_empty());
    }

    #[test]
    fn a_phi_leaving_into_a_handing_chain_releases_at_the_return() {
        // Found by review: `e`, never pushed itself, hands its last array to
        // a handing chain that pushes it (counted); letting go at the
        // return it must release that array, not free it under the tape.
        let src = "func @f(%n: i64, %m: i64, %x: [f64]) -> f64 {
#1:
  %s = call copy(%x) :: [f64]
  goto #2
#2:
  %e = phi [#1 => %s, #3 => %t] :: [f64]
  %i = phi [#1 => 0, #3 => %i1] :: i64
  %c = call lt(%i, %n) :: bool
  gotoifnot %c, #4
#3:
  %t = call copy(%e) :: [f64]
  %u = call arrayref(%t, 0) :: f64
  %u2 = call add(%u, 1.0) :: f64
  call arrayset(%t, 0, %u2)
  %i1 = call iadd(%i, 1) :: i64
  goto #2
#4:
  goto #5
#5:
  %a = phi [#4 => %e, #6 => %b] :: [f64]
  %b = phi [#4 => %e, #6 => %d] :: [f64]
  %k = phi [#4 => 0, #6 => %k1] :: i64
  %c2 = call lt(%k, %m) :: bool
  gotoifnot %c2, #7
#6:
  call push(%a)
  %d = call copy(%b) :: [f64]
  %v = call arrayref(%a, 0) :: f64
  %v2 = call mul(%v, 2.0) :: f64
  call arrayset(%d, 0, %v2)
  %k1 = call iadd(%k, 1) :: i64
  goto #5
#7:
  %r = call arrayref(%x, 0) :: f64
  return %r
}
";
        assert_eq!(chains(src), ["a<-b:e/s"]);
        assert_eq!(latch_phis(src), ["e:leaves:entered:at_return", "b", "a"]);
        let e = freed(src).into_iter().find(|s| s.starts_with("e:"));
        assert_eq!(e.as_deref(), Some("e:release"));
    }

    /// The choosing phis and sharing webs of `@f` in `src` (counted
    /// tapes), each as `p<-s1,s2` (`p,q<-s1` for a sharing web's phis)
    /// with its web's sites, and `:leaves` when its arrays may leave the
    /// loop.
    fn webs(src: &str) -> Vec<String> {
        analysed(src, true, |freed, name| {
            freed
                .webs
                .iter()
                .map(|w| {
                    let sites: Vec<String> = w.sites.iter().map(|&s| name(s)).collect();
                    let leaves = w.leaves;
                    let phis: Vec<String> = w.phis().map(name).collect();
                    format!(
                        "{}<-{}{}",
                        phis.join(","),
                        sites.join(","),
                        if leaves { ":leaves" } else { "" }
                    )
                })
                .collect()
        })
    }

    /// `src` (a loop ending its latch block with `%j = call iadd(%i, 1)`)
    /// with `vals` pushed as they are before that statement.
    fn pushing(src: &str, vals: &[&str]) -> String {
        let pushes: String = vals.iter().map(|v| format!("  call push({v})\n")).collect();
        let at = "  %j = call iadd(%i, 1) :: i64\n";
        src.replace(at, &format!("{pushes}{at}"))
    }

    /// `src` (returning `%z = call arrayref(V, 0)`) returning the array
    /// `v` itself.
    fn returning(src: &str, v: &str) -> String {
        src.replace("-> f64 {", "-> [f64] {").replace(
            &format!("  %z = call arrayref({v}, 0) :: f64\n  return %z"),
            &format!("  return {v}"),
        )
    }

    /// `src` with `%v` the result of a call through a function value `%g`
    /// passed `%b` (instead of an element read of it).
    fn calling_a_value(src: &str) -> String {
        src.replace(
            "func @f(%n: i64, %x: [f64])",
            "func @f(%n: i64, %x: [f64], %g: fn([f64]) -> f64)",
        )
        .replace(
            "  %v = call arrayref(%b, 0) :: f64\n",
            "  %v = call %g(%b) :: f64\n",
        )
    }

    /// A loop replacing its array on some iterations only: the header's
    /// phi `a` is entered from the latch with `c`, a phi of `a` itself and
    /// the new array `b`.
    const CHOOSING_LOOP: &str = "func @f(%n: i64, %x: [f64]) -> f64 {
#1:
  %e = call copy(%x) :: [f64]
  goto #2
#2:
  %a = phi [#1 => %e, #6 => %c] :: [f64]
  %i = phi [#1 => 0, #6 => %j] :: i64
  %m = call lt(%i, %n) :: bool
  gotoifnot %m, #7
#3:
  %b = call copy(%a) :: [f64]
  %v = call arrayref(%b, 0) :: f64
  %w = call arrayref(%a, 0) :: f64
  %better = call lt(%v, %w) :: bool
  gotoifnot %better, #5
#4:
  goto #6
#5:
  goto #6
#6:
  %c = phi [#4 => %b, #5 => %a] :: [f64]
  %j = call iadd(%i, 1) :: i64
  goto #2
#7:
  %z = call arrayref(%a, 0) :: f64
  return %z
}
";

    #[test]
    fn a_phi_choosing_between_its_array_and_a_new_one_lets_go_on_its_edges() {
        let src = CHOOSING_LOOP;
        assert_eq!(webs(src), ["a<-b"]);
        // `e` lets go of its own array (the phi never holds it); `a` and
        // `b` let go on the edges into `#2`.
        assert_eq!(freed(src), ["e", "a", "b"]);
        // Pushed as they are: released, pushes counted.
        let pushed = pushing(src, &["%a", "%b"]);
        assert_eq!(webs(&pushed), ["a<-b"]);
        assert_eq!(freed(&pushed), ["e:release", "a:release", "b:release"]);
        // Returned after the loop: it may leave, let go of only on the
        // latch edges.
        assert_eq!(webs(&returning(src, "%a")), ["a<-b:leaves"]);
        // Two choices in a row: a web of two phis and two sites.
        let two = src
            .replace("#6 => %c]", "#9 => %d]")
            .replace(
                "  %j = call iadd(%i, 1) :: i64
  goto #2",
                "  %k = call copy(%c) :: [f64]
  %u = call arrayref(%k, 1) :: f64
  %y = call lt(%u, 0.0) :: bool
  gotoifnot %y, #8
#10:
  goto #9
#8:
  goto #9
#9:
  %d = phi [#10 => %k, #8 => %c] :: [f64]
  %j = call iadd(%i, 1) :: i64
  goto #2",
            )
            .replace("#6 => %j]", "#9 => %j]");
        assert_eq!(webs(&two), ["a<-b,k"]);
    }

    #[test]
    fn a_choosing_phi_refuses_what_it_cannot_let_go_of_on_its_edges() {
        let src = CHOOSING_LOOP;
        // The web's phi carried into the next iteration by another phi of
        // the header: the array replaced is still used there.
        let carried = src.replace(
            "  %i = phi [#1 => 0, #6 => %j] :: i64
",
            "  %i = phi [#1 => 0, #6 => %j] :: i64
  %o = phi [#1 => %x, #6 => %c] :: [f64]
  %q = call arrayref(%o, 0) :: f64
",
        );
        // (A choosing phi refuses it; `a` and `o` then hold one array
        // between them, and own it together as a sharing web.)
        assert_eq!(webs(&carried), ["a,o<-b"]);
        // The new array passed to a call through a function value.
        assert_eq!(webs(&calling_a_value(src)), Vec::<String>::new());
        // Made by a loop inside the loop: the statement runs several times
        // between two entries of the header.
        let inner = src.replace(
            "  %b = call copy(%a) :: [f64]
",
            "  goto #11
#11:
  %k = phi [#3 => 0, #11 => %k1] :: i64
  %b = call copy(%a) :: [f64]
  %k1 = call iadd(%k, 1) :: i64
  %km = call lt(%k1, 3) :: bool
  gotoifnot %km, #12
#13:
  goto #11
#12:
",
        );
        assert_eq!(webs(&inner), Vec::<String>::new());
        // An edge into the header that is not a `goto` (the lowering has
        // no edge of its own to let go on).
        let branch = src.replace(
            "  %j = call iadd(%i, 1) :: i64
  goto #2",
            "  %j = call iadd(%i, 1) :: i64
  %y = call lt(%j, 0) :: bool
  gotoifnot %y, #2
#8:
  %r = call arrayref(%c, 0) :: f64
  return %r",
        );
        assert_eq!(webs(&branch), Vec::<String>::new());
    }

    /// A best iterate kept by reference: the step's array `b` enters the
    /// header's `r` and, on some iterations, `k` (through `c`).
    const SHARING_LOOP: &str = "func @f(%n: i64, %x: [f64]) -> f64 {
#1:
  %e = call copy(%x) :: [f64]
  goto #2
#2:
  %r = phi [#1 => %e, #6 => %b] :: [f64]
  %k = phi [#1 => %x, #6 => %c] :: [f64]
  %i = phi [#1 => 0, #6 => %j] :: i64
  %m = call lt(%i, %n) :: bool
  gotoifnot %m, #7
#3:
  %b = call copy(%r) :: [f64]
  %v = call arrayref(%b, 0) :: f64
  %w = call arrayref(%k, 0) :: f64
  %better = call lt(%v, %w) :: bool
  gotoifnot %better, #5
#4:
  goto #6
#5:
  goto #6
#6:
  %c = phi [#4 => %b, #5 => %k] :: [f64]
  %j = call iadd(%i, 1) :: i64
  goto #2
#7:
  %z = call arrayref(%k, 0) :: f64
  return %z
}
";

    #[test]
    fn header_phis_sharing_the_arrays_their_latches_bring_own_them_together() {
        let src = SHARING_LOOP;
        assert_eq!(webs(src), ["r,k<-b"]);
        // `e` lets go of its own array (no phi's slot ever holds it); `r`,
        // `k` and `b` on the edges into `#2`.
        assert_eq!(freed(src), ["e", "r", "b", "k"]);
        // `k` takes `r`'s array before the step (the best before it).
        let before = src.replace("#4 => %b, #5 => %k]", "#4 => %r, #5 => %k]");
        assert_eq!(webs(&before), ["r,k<-b"]);
        // The phis pushed as they are: released, pushes counted. `e`, the
        // array `r` is entered with, too: a push of `r` or `k` holding it
        // pushes it tagged ("Webs entered with pops"; before, untagged,
        // and `e` was kept).
        let pushed = pushing(src, &["%r", "%k", "%b"]);
        assert_eq!(webs(&pushed), ["r,k<-b"]);
        assert_eq!(
            freed(&pushed),
            ["e:release", "r:release", "b:release", "k:release"]
        );
        // Entered with a pop (a replay's snapshot array): dropped, its word
        // pushed again by the phis holding its array.
        let popped = pushed.replace("%e = call copy(%x) :: [f64]", "%e = call pop() :: [f64]");
        assert_eq!(webs(&popped), ["r,k<-b"]);
        assert_eq!(
            freed(&popped),
            ["e:drop", "r:release", "b:release", "k:release"]
        );
        // Entered with an argument: no entry to count, pushed untagged.
        let argument = pushed.replace("[#1 => %e, #6 => %b]", "[#1 => %x, #6 => %b]");
        assert_eq!(
            freed(&argument),
            ["e", "r:release", "b:release", "k:release"]
        );
        // Returned after the loop: it may leave.
        assert_eq!(webs(&returning(src, "%k")), ["r,k<-b:leaves"]);
        // A phi of the body pushed: its pushes are worded by the web's
        // slots ("Pushed body phis"; before, no web), so the web releases.
        let body = pushing(src, &["%c"]);
        assert_eq!(webs(&body), ["r,k<-b"]);
        assert_eq!(freed(&body), ["e", "r:release", "b:release", "k:release"]);
        // The new array passed through a function value: no web.
        assert_eq!(webs(&calling_a_value(src)), Vec::<String>::new());
        // A third header phi taking only the argument stays out.
        let third = src.replace(
            "  %i = phi [#1 => 0, #6 => %j] :: i64
",
            "  %i = phi [#1 => 0, #6 => %j] :: i64
  %o = phi [#1 => %x, #6 => %x] :: [f64]
  %q = call arrayref(%o, 0) :: f64
",
        );
        assert_eq!(webs(&third), ["r,k<-b"]);
        let third_taking = third.replace("#6 => %x] :: [f64]", "#6 => %c] :: [f64]");
        // `o` takes `c` on the latch and `x` from outside: it joins.
        assert_eq!(webs(&third_taking), ["r,k,o<-b"]);
    }

    #[test]
    fn a_latch_owning_phi_entered_through_a_select_counts_its_pushes_but_of_the_other() {
        // A replay's start shadow: `z` fresh or the argument `x`. `p` and
        // the select `e` count their pushes but when they hold `x`, and
        // `z` takes those as its own: released.
        let src = "func @f(%n: i64, %x: [f64], %fresh: bool) -> f64 {
#1:
  %k = call length(%x) :: i64
  %z = call zeros(%k) :: [f64]
  %e = call select(%fresh, %z, %x) :: [f64]
  call push(%e)
  goto #2
#2:
  %p = phi [#1 => %e, #3 => %t] :: [f64]
  %i = phi [#1 => 0, #3 => %j] :: i64
  %c = call lt(%i, %n) :: bool
  gotoifnot %c, #4
#3:
  call push(%p)
  %t = call zeros(%k) :: [f64]
  %j = call iadd(%i, 1) :: i64
  goto #2
#4:
  call push(%p)
  %r = call arrayref(%p, 0) :: f64
  return %r
}
";
        assert_eq!(latch_phis(src), ["p:entered"]);
        assert_eq!(freed(src), ["z:release", "p:release", "t:release:handed"]);
        // The select of two sites: not entered through it, and neither is
        // let go of (their select is pushed).
        let two = src.replace(
            "  %e = call select(%fresh, %z, %x) :: [f64]
",
            "  %z2 = call zeros(%k) :: [f64]
  %e = call select(%fresh, %z, %z2) :: [f64]
",
        );
        assert_eq!(latch_phis(&two), ["p"]);
        assert_eq!(freed(&two), ["p:release", "t:release:handed"]);
    }

    #[test]
    fn a_phi_passing_its_array_to_another_phi_makes_a_handing_chain() {
        // `q`'s arrays enter `p` on the next entry, so `q`, whose entries
        // are both sites' values, does not stay inside as a site of `#2`
        // would, and owns nothing alone (letting go of its old array on
        // entry would free `p`'s new one); with `p` it is a handing chain,
        // whose tail lets go of the array it held on each entry from the
        // latch (before handing chains, neither owned anything). `a` and
        // `b` are freed at the return.
        let src = "func @f(%n: i64) -> f64 {
#1:
  %a = call zeros(3) :: [f64]
  %b = call zeros(3) :: [f64]
  goto #2
#2:
  %p = phi [#1 => %a, #3 => %q] :: [f64]
  %q = phi [#1 => %b, #3 => %t] :: [f64]
  %i = phi [#1 => 0, #3 => %j] :: i64
  %c = call lt(%i, %n) :: bool
  gotoifnot %c, #4
#3:
  %t = call copy(%p) :: [f64]
  %j = call iadd(%i, 1) :: i64
  goto #2
#4:
  %z = call arrayref(%p, 0) :: f64
  return %z
}
";
        assert_eq!(freed(src), ["a", "b", "q", "p", "t:handed"]);
        assert_eq!(chains(src), ["p<-q:a/a,b/b"]);
    }

    #[test]
    fn a_phi_after_the_site_in_one_iteration_is_followed() {
        // `%m` merges the temporary with an argument inside the iteration
        // that made it: the temporary is freed, the argument never is.
        let src = "func @f(%a: [f64], %n: i64) -> f64 {
#1:
  goto #2
#2:
  %i = phi [#1 => 0, #5 => %j] :: i64
  %c = call lt(%i, %n) :: bool
  gotoifnot %c, #6
#3:
  %t = call zeros(3) :: [f64]
  %odd = call irem(%i, 2) :: i64
  %b = call eq(%odd, 0) :: bool
  gotoifnot %b, #5
#4:
  goto #5
#5:
  %m = phi [#3 => %a, #4 => %t] :: [f64]
  call arrayset(%m, 0, 1.0)
  %j = call iadd(%i, 1) :: i64
  goto #2
#6:
  %r = call arrayref(%a, 0) :: f64
  return %r
}
";
        assert_eq!(freed(src), ["t"]);
    }

    #[test]
    fn pops_are_dropped_and_only_a_sites_own_value_pushed_is_counted() {
        // `t` is pushed as it is, and `t` and `u` through a `select`,
        // counted as theirs ("Pushed selects"): both released; `w` is passed to `@save`, which only pushes its
        // parameter as it is: passed tagged, so released ("Pushed
        // parameters"). The pop `q` is pushed back as it is
        // (dropped, the push counted again); `e` is pushed back through a
        // tuple and returned: neither is let go of.
        let src = "func @save(%a: [f64]) -> () {
#1:
  call push(%a)
  return ()
}
func @f(%n: i64, %c: bool) -> [f64] {
#1:
  %t = call zeros(%n) :: [f64]
  call push(%t)
  %u = call zeros(%n) :: [f64]
  %s = call select(%c, %u, %t) :: [f64]
  call push(%s)
  %w = call zeros(%n) :: [f64]
  %x = invoke @save(%w) :: ()
  %q = call pop() :: [f64]
  call push(%q)
  %e = call pop() :: [f64]
  %p = call tuple(%e, %n) :: ([f64], i64)
  call push(%p)
  %r = call pop() :: [f64]
  return %r
}
";
        assert_eq!(
            freed(src),
            ["t:release", "u:release", "w:release", "q:drop"]
        );
        // Tapes not counted: no pop is a site, every push an escape.
        assert!(freed_in(src, false).is_empty());
    }

    #[test]
    fn calls_free_what_their_callees_do_not_keep() {
        // `@sum_rec` passes its array only to itself and reads it: it keeps
        // nothing. `@id` returns its array, `@save` pushes it, `@fwd`
        // passes it to `@id`: those keep it.
        let src = "func @sum_rec(%a: [f64], %k: i64) -> f64 {
#1:
  %z = call eq(%k, 0) :: bool
  gotoifnot %z, #3
#2:
  return 0.0
#3:
  %k1 = call isub(%k, 1) :: i64
  %r = invoke @sum_rec(%a, %k1) :: f64
  %x = call arrayref(%a, %k1) :: f64
  %s = call add(%r, %x) :: f64
  return %s
}
func @id(%a: [f64]) -> [f64] {
#1:
  return %a
}
func @save(%a: [f64]) -> () {
#1:
  call push(%a)
  return ()
}
func @fwd(%a: [f64]) -> f64 {
#1:
  %b = invoke @id(%a) :: [f64]
  %x = call arrayref(%b, 0) :: f64
  return %x
}
func @f(%n: i64) -> f64 {
#1:
  %t = call zeros(%n) :: [f64]
  %x = invoke @sum_rec(%t, %n) :: f64
  %u = call zeros(%n) :: [f64]
  %y = invoke @fwd(%u) :: f64
  %v = call zeros(%n) :: [f64]
  %w = invoke @save(%v) :: ()
  %s = call add(%x, %y) :: f64
  return %s
}
";
        // `@save` only pushes its array as it is: `v`, passed tagged, is
        // released ("Pushed parameters").
        assert_eq!(freed(src), ["t", "v:release"]);
        assert_eq!(freed_in(src, false), ["t"]);
        let (_, sums, ids) = summaries_of(src, &["sum_rec", "id", "save", "fwd"]);
        let kept: Vec<Vec<bool>> = ids.iter().map(|g| sums.kept[g].clone()).collect();
        assert_eq!(
            kept,
            [vec![false, false], vec![true], vec![true], vec![true]]
        );
    }

    #[test]
    fn a_parameter_its_callee_only_pushes_is_passed_tagged_and_released() {
        // `@step` pushes its `a` as it is and reads it (as reverse mode's
        // forward sweep of a step function does): pushed. `@on` passes it
        // on as it is to `@step`'s, the word it was given: pushed too
        // ("Pushed parameters passed on"). `@sel` pushes a `select` of it,
        // `@ret` pushes and returns it: kept, never pushed so.
        let src = "func @step(%a: [f64], %h: f64) -> [f64] {
#1:
  %b = call copy(%a) :: [f64]
  %x = call arrayref(%a, 0) :: f64
  call push(%a)
  call push(%b)
  return %b
}
func @sel(%a: [f64], %c: bool) -> () {
#1:
  %s = call select(%c, %a, %a) :: [f64]
  call push(%s)
  return ()
}
func @ret(%a: [f64]) -> [f64] {
#1:
  call push(%a)
  return %a
}
func @on(%a: [f64]) -> () {
#1:
  %b = invoke @step(%a, 1.0) :: [f64]
  return ()
}
func @f(%x: [f64], %n: i64) -> f64 {
#1:
  %t = call zeros(%n) :: [f64]
  %y = invoke @step(%t, 1.0) :: [f64]
  %u = call zeros(%n) :: [f64]
  %u2 = invoke @ret(%u) :: [f64]
  %v = call zeros(%n) :: [f64]
  invoke @on(%v)
  %w = call zeros(%n) :: [f64]
  invoke @sel(%w, true)
  goto #2
#2:
  %p = phi [#1 => %x, #3 => %r] :: [f64]
  %i = phi [#1 => 0, #3 => %j] :: i64
  %c = call lt(%i, %n) :: bool
  gotoifnot %c, #4
#3:
  %r = invoke @step(%p, 0.5) :: [f64]
  %j = call iadd(%i, 1) :: i64
  goto #2
#4:
  return 0.0
}
";
        let (m, sums, ids) = summaries_of(src, &["step", "sel", "ret", "on"]);
        let pushed: Vec<Vec<bool>> = ids.iter().map(|g| sums.pushed[g].clone()).collect();
        assert_eq!(
            pushed,
            [
                vec![true, false],
                vec![false, false],
                vec![false],
                vec![true]
            ]
        );
        // `t`, passed to `@step`, is released; `y` and `r` are fresh
        // results `@step` pushed. The loop's phi `p`, passed to `@step` in
        // its loop, owns what its latch brings (`r`), counting its pushes
        // (tagged when it holds an array of its own, not `x`). `@ret`
        // pushes its parameter and returns it (an either leaf): `u`, passed
        // to it tagged and followed to `u2`, is released ("Through either
        // calls"). `v`, passed tagged to `@on`, which passes it on, is
        // released too.
        assert_eq!(
            freed(src),
            [
                "t:release",
                "y:release",
                "u:release",
                "v:release",
                "p:release",
                "r:release:handed"
            ]
        );
        assert_eq!(latch_phis(src), ["p"]);
        let tagged = analysed(src, true, |freed, name| {
            let f = m.get(m.by_name("f").expect("@f")).expect("func");
            let mut out: Vec<String> = tagged_args(f, &freed)
                .into_iter()
                .flat_map(|(i, ks)| {
                    let InstKind::Invoke { args, .. } = &f.insts[i].kind else {
                        return Vec::new();
                    };
                    ks.into_iter()
                        .map(|(k, l)| match args[k] {
                            Operand::Value(v) => format!("{}:{l:?}", name(v)),
                            _ => "?".into(),
                        })
                        .collect()
                })
                .collect();
            out.sort();
            out
        });
        assert_eq!(tagged, ["p:Release", "t:Release", "u:Release", "v:Release"]);
        // Tapes not counted: passing to `@step` keeps, as a push would.
        assert_eq!(freed_in(src, false), Vec::<String>::new());
        // A compiler that has compiled a function uncounted may have
        // compiled `@step` so, not masking `a`: nothing is passed tagged.
        let mut m = m;
        m.set_counted_tapes(true);
        let f = m.get(m.by_name("f").expect("@f")).expect("func");
        let mut sums = Summaries {
            uncounted: true,
            ..Summaries::default()
        };
        let freed = freed_sites(f, &m, &mut sums);
        assert!(freed.sites.is_empty() && freed.passed.is_empty());
    }

    /// A loop replacing its array by `@g`'s result, `@g` making a new array
    /// or handing its argument back.
    const EITHER_LOOP: &str = "func @g(%a: [f64], %k: i64) -> [f64] {
#1:
  %c = call eq(%k, 0) :: bool
  gotoifnot %c, #3
#2:
  %b = call copy(%a) :: [f64]
  return %b
#3:
  call arrayset(%a, 0, 1.0)
  return %a
}
func @f(%n: i64, %x: [f64]) -> f64 {
#1:
  goto #2
#2:
  %p = phi [#1 => %x, #3 => %t] :: [f64]
  %i = phi [#1 => 0, #3 => %j] :: i64
  %c = call lt(%i, %n) :: bool
  gotoifnot %c, #4
#3:
  %t = invoke @g(%p, %i) :: [f64]
  %j = call iadd(%i, 1) :: i64
  goto #2
#4:
  %z = call arrayref(%p, 0) :: f64
  return %z
}
";

    #[test]
    fn functions_returning_a_new_array_or_their_argument_are_either() {
        // `@g` above; `@h` pushes its argument as it is (either, that
        // parameter pushed: counted when passed tagged), `@k` returns a
        // pop, `@m` a new array it also keeps in a tuple it pushes, `@id`
        // its argument only (handed back on every call: an either function
        // that makes nothing), `@new` a fresh array (a call site, not
        // either).
        let src = format!(
            "{EITHER_LOOP}func @h(%a: [f64]) -> [f64] {{
#1:
  call push(%a)
  return %a
}}
func @k(%a: [f64], %c: bool) -> [f64] {{
#1:
  %b = call pop() :: [f64]
  %r = call select(%c, %a, %b) :: [f64]
  return %r
}}
func @m(%a: [f64], %c: bool) -> [f64] {{
#1:
  %b = call copy(%a) :: [f64]
  %t = call tuple(%b, 1.0) :: ([f64], f64)
  call push(%t)
  %r = call select(%c, %a, %b) :: [f64]
  return %r
}}
func @id(%a: [f64]) -> [f64] {{
#1:
  return %a
}}
func @new(%a: [f64]) -> [f64] {{
#1:
  %b = call copy(%a) :: [f64]
  return %b
}}
"
        );
        let names = ["g", "h", "k", "m", "id", "new"];
        let (_, sums, ids) = summaries_of(&src, &names);
        let either: Vec<Option<usize>> = ids
            .iter()
            .map(|&g| sums.either(g, &[]).map(|e| e.param))
            .collect();
        assert_eq!(either, [Some(0), Some(0), None, None, Some(0), None]);
    }

    #[test]
    fn a_function_returning_what_an_inlined_helper_hands_back_is_either() {
        // `@step` returns a copy or what `@nudge` returns, which is its
        // argument written in place. Summarised as the module has it, the
        // call is an unknown source and `@step` holds neither; with its
        // small callees inlined, as code generation compiles it, it is an
        // either function of its argument (since session 43).
        let src = "func @nudge(%a: [f64]) -> [f64] {
#1:
  %x = call arrayref(%a, 0) :: f64
  %y = call mul(%x, 0.5) :: f64
  call arrayset(%a, 0, %y)
  return %a
}
func @step(%a: [f64], %c: bool) -> [f64] {
#1:
  gotoifnot %c, #3
#2:
  %b = call copy(%a) :: [f64]
  goto #4
#3:
  %n = invoke @nudge(%a) :: [f64]
  goto #4
#4:
  %r = phi [#2 => %b, #3 => %n] :: [f64]
  return %r
}
";
        let m = parse_module(src).expect("parses");
        let step = m.by_name("step").expect("function");
        let either = |inline: Option<irad_passes::pe::Limits>| {
            let mut sums = Summaries::default();
            sums.pin_inline(&inline);
            sums.ensure(&m, &[step]);
            sums.either(step, &[]).map(|e| e.param)
        };
        assert_eq!(either(None), None);
        assert_eq!(either(Some(irad_passes::pe::Limits::default())), Some(0));
    }

    #[test]
    fn forward_sweeps_returning_a_new_array_or_their_argument_are_either_per_leaf() {
        // A forward sweep's shape: the array and its shadow, each its
        // parameter (pushed as it is) or a new array (the shadow pushed).
        // `@one` returns its first parameter at both leaves; `@odd` pushes
        // a `[bool]` parameter, whose caller's address may be odd.
        let src = [
            FWD_SWEEP,
            "func @one(%a: [f64], %s: [f64]) -> ([f64], [f64]) {
#1:
  %t = call tuple(%a, %a) :: ([f64], [f64])
  return %t
}
func @odd(%a: [bool]) -> [bool] {
#1:
  call push(%a)
  return %a
}
",
        ]
        .concat();
        let (_, sums, ids) = summaries_of(&src, &["fwd", "one", "odd"]);
        let leaf = |g: FuncId, path: &[usize]| {
            sums.either(g, path)
                .map(|e| (e.param, e.pushed, e.param_pushed))
        };
        assert_eq!(leaf(ids[0], &[0]), Some((0, false, true)));
        assert_eq!(leaf(ids[0], &[1]), Some((2, true, true)));
        // One parameter serves one leaf only; the other has none.
        assert_eq!(leaf(ids[1], &[0]), None);
        assert_eq!(leaf(ids[1], &[1]), None);
        assert_eq!(leaf(ids[2], &[]), None);
    }

    #[test]
    fn either_phis_of_a_forward_sweep_pass_their_arrays_tagged() {
        // A loop calling a forward sweep that pushes the array and shadow
        // it is given and returns them or new ones: each header phi owns
        // its field's arrays, releases (pushed by the callee), and passes
        // its array as the word its push would push. Uncounted, the
        // callee's pushes of them are escapes.
        let src = [
            FWD_SWEEP,
            "func @f(%n: i64, %x: [f64], %y: [f64]) -> f64 {
#1:
  goto #2
#2:
  %p = phi [#1 => %x, #3 => %u] :: [f64]
  %d = phi [#1 => %y, #3 => %w] :: [f64]
  %i = phi [#1 => 0, #3 => %j] :: i64
  %c = call lt(%i, %n) :: bool
  gotoifnot %c, #4
#3:
  %t = invoke @fwd(%p, %i, %d) :: ([f64], [f64])
  %u = call getfield(%t, 0) :: [f64]
  %w = call getfield(%t, 1) :: [f64]
  %j = call iadd(%i, 1) :: i64
  goto #2
#4:
  call push(%d)
  %z = call arrayref(%p, 0) :: f64
  return %z
}
",
        ]
        .concat();
        assert_eq!(
            freed(&src),
            [
                "p:release",
                "d:release",
                "u:release:handed",
                "w:release:handed"
            ]
        );
        let tagged = analysed(&src, true, |freed, _| {
            let f = parse_module(&src).expect("parses");
            let f = f.get(f.by_name("f").expect("@f")).expect("func").clone();
            let mut args: Vec<(usize, Letgo)> =
                tagged_args(&f, &freed).into_values().flatten().collect();
            args.sort_by_key(|&(k, _)| k);
            args
        });
        assert_eq!(tagged, [(0, Letgo::Release), (2, Letgo::Release)]);
        assert_eq!(freed_in(&src, false), Vec::<String>::new());
    }

    #[test]
    fn either_phis_entered_with_made_arrays_count_their_pushes_and_let_them_go() {
        // A replay's recording: entered with its copy of the snapshot
        // (`c`, through the phi of a split loop, `s`) and a fresh start
        // shadow (`z`, pushed, and pushed again as the end shadow `d`
        // after the loop). `p` and `d` count every push of themselves,
        // tagged whatever they hold, so `c`, `s`'s latch copies (`k`) and
        // `z`, whose walks follow them through the calls to their leaves,
        // are released ("Through either calls", "Entered with made
        // arrays"); before, they stayed until the run ended.
        let src = [
            FWD_SWEEP,
            "func @f(%n: i64, %x: [f64]) -> i64 {
#1:
  %c = call copy(%x) :: [f64]
  %l = call length(%x) :: i64
  %z = call zeros(%l) :: [f64]
  call push(%z)
  goto #5
#5:
  %s = phi [#1 => %c, #6 => %k] :: [f64]
  %h = phi [#1 => 0, #6 => %h1] :: i64
  %e = call lt(%h, 2) :: bool
  gotoifnot %e, #2
#6:
  %k = call copy(%s) :: [f64]
  %h1 = call iadd(%h, 1) :: i64
  goto #5
#2:
  %p = phi [#5 => %s, #3 => %u] :: [f64]
  %d = phi [#5 => %z, #3 => %w] :: [f64]
  %i = phi [#5 => 0, #3 => %j] :: i64
  %b = call lt(%i, %n) :: bool
  gotoifnot %b, #4
#3:
  %t = invoke @fwd(%p, %i, %d) :: ([f64], [f64])
  %u = call getfield(%t, 0) :: [f64]
  %w = call getfield(%t, 1) :: [f64]
  %j = call iadd(%i, 1) :: i64
  goto #2
#4:
  call push(%d)
  return %i
}
",
        ]
        .concat();
        assert_eq!(
            freed(&src),
            [
                "z:release",
                "s:release",
                "p:release",
                "d:release",
                "c:release:handed",
                "k:release:handed",
                "u:release:handed",
                "w:release:handed"
            ]
        );
        let counting = analysed(&src, true, |freed, name| {
            let mut out: Vec<String> = freed.counting.keys().map(|&v| name(v)).collect();
            out.sort();
            out
        });
        assert_eq!(counting, ["d", "p", "u", "w"]);
        // Uncounted, the callee's pushes are escapes and nothing counts:
        // `c` and `z` stay, and the split's phi owns only what its latch
        // brings, never letting go of its last (it enters `p`).
        assert_eq!(freed_in(&src, false), ["s", "k:handed"]);
        // The calls' results pushed in the loop (the recording of `a =
        // step(a); s = s + a[1];` pushes the shadow `w` for the read's
        // pullback): those pushes count whatever `w` holds, `z` handed
        // back included, so `z`'s walk meets only counted pushes and it
        // is released. Before (session 43), a push of `w` counted only
        // when `w` was not `z`, an escape for `z`'s walk: every replay
        // kept its start shadow until the run ended.
        let result_pushed = src.replace(
            "  %j = call iadd(%i, 1) :: i64\n",
            "  call push(%w)\n  call push(%u)\n  %j = call iadd(%i, 1) :: i64\n",
        );
        assert_eq!(freed(&result_pushed), freed(&src));
    }

    #[test]
    fn an_either_phi_owns_what_its_calls_made_only_when_nothing_else_may_hold_it() {
        // `p` owns the arrays the calls make (`t` handed over); read after
        // the loop, it lets go of its last at the return.
        assert_eq!(freed(EITHER_LOOP), ["p", "t:handed"]);
        assert_eq!(latch_phis(EITHER_LOOP), ["p"]);
        // Pushed inside the loop: counted (tagged while it holds an array
        // of its own), so it releases.
        let pushed = EITHER_LOOP.replace(
            "  %j = call iadd(%i, 1) :: i64\n",
            "  call push(%p)\n  %j = call iadd(%i, 1) :: i64\n",
        );
        assert_eq!(freed(&pushed), ["p:release", "t:release:handed"]);
        // The result pushed: counted unless it is the array `p` was entered
        // with, handed back (`Freed::either_results`), so `p` releases.
        let result_pushed = EITHER_LOOP.replace(
            "  %j = call iadd(%i, 1) :: i64\n",
            "  call push(%t)\n  %j = call iadd(%i, 1) :: i64\n",
        );
        assert_eq!(freed(&result_pushed), ["p:release", "t:release:handed"]);
        // Refused: taken by a second phi, or `p` pushed inside a tuple.
        let two_phis = EITHER_LOOP
            .replace(
                "  %i = phi [#1 => 0, #3 => %j] :: i64\n",
                "  %i = phi [#1 => 0, #3 => %j] :: i64\n  %q = phi [#1 => %x, #3 => %t] :: [f64]\n",
            )
            .replace(
                "  %z = call arrayref(%p, 0) :: f64\n",
                "  %y = call arrayref(%q, 0) :: f64\n  %z = call arrayref(%p, 0) :: f64\n",
            );
        assert_eq!(freed(&two_phis), Vec::<String>::new());
        let tupled = EITHER_LOOP.replace(
            "  %j = call iadd(%i, 1) :: i64\n",
            "  %w = call tuple(%p, 1.0) :: ([f64], f64)\n  call push(%w)\n  %j = call iadd(%i, 1) :: i64\n",
        );
        assert_eq!(freed(&tupled), Vec::<String>::new());
        // Another call passed another value: not the phi's own call.
        let other = EITHER_LOOP.replace("invoke @g(%p, %i)", "invoke @g(%x, %i)");
        assert_eq!(freed(&other), Vec::<String>::new());
    }

    /// `EITHER_LOOP` leaving by a `break` after the call (`%d`): the phi
    /// after the loop takes `%p` on the normal exit and `%t` on the
    /// `break`, and is used as `use` says.
    fn broken_either_loop(after: &str) -> String {
        EITHER_LOOP
            .replace(
                "  %j = call iadd(%i, 1) :: i64\n  goto #2\n#4:\n  %z = call arrayref(%p, 0) :: f64\n  return %z\n",
                &format!(
                    "  %d = call arrayref(%t, 0) :: f64\n  %e = call lt(%d, 0.0) :: bool\n  gotoifnot %e, #6\n#5:\n  goto #7\n#6:\n  %j = call iadd(%i, 1) :: i64\n  goto #2\n#4:\n  goto #7\n#7:\n  %q = phi [#4 => %p, #5 => %t] :: [f64]\n{after}"
                ),
            )
    }

    #[test]
    fn an_either_phi_whose_result_leaves_by_a_break_owns_what_its_calls_replaced() {
        // Read after the loop: `p` owns the calls' arrays, and lets go of
        // its last when entered again or at the return (the phi after the
        // loop is in a block its header dominates).
        let read = broken_either_loop("  %z = call arrayref(%q, 0) :: f64\n  return %z\n");
        assert_eq!(freed(&read), ["p", "t:handed"]);
        assert_eq!(latch_phis(&read), ["p"]);
        // Returned, or kept in a tuple: the last array is never let go of.
        let returned = broken_either_loop("  return %q\n")
            .replace("-> f64 {\n#1:\n  goto #2", "-> [f64] {\n#1:\n  goto #2");
        assert_eq!(latch_phis(&returned), ["p:leaves"]);
        let tupled = broken_either_loop(
            "  %w = call tuple(%q, 1.0) :: ([f64], f64)\n  %y = call getfield(%w, 0) :: [f64]\n  %z = call arrayref(%y, 0) :: f64\n  return %z\n",
        );
        assert_eq!(latch_phis(&tupled), ["p:leaves"]);
        // Pushed after the loop: `p` releases, `t`'s push counted unless it
        // pushes the array `p` was entered with.
        let pushed = broken_either_loop(
            "  call push(%t)\n  %z = call arrayref(%q, 0) :: f64\n  return %z\n",
        )
        .replace("#5:\n  goto #7", "#5:\n  call push(%t)\n  goto #7")
        .replace(
            "  call push(%t)\n  %z = call arrayref(%q, 0)",
            "  %z = call arrayref(%q, 0)",
        );
        assert_eq!(freed(&pushed), ["p:release", "t:release:handed"]);
        let results = analysed(&pushed, true, |freed, name| {
            let mut r: Vec<String> = freed
                .either_results
                .iter()
                .map(|(v, p)| format!("{}:{}", name(*v), name(*p)))
                .collect();
            r.sort();
            r
        });
        assert_eq!(results, ["t:p"]);
        // Taken by a second phi in the loop: refused.
        let captured = read.replace(
            "  %i = phi [#1 => 0, #3 => %j] :: i64\n",
            "  %i = phi [#1 => 0, #6 => %j] :: i64\n  %l = phi [#1 => %x, #6 => %t] :: [f64]\n",
        );
        assert_eq!(latch_phis(&captured), Vec::<String>::new());
    }

    #[test]
    fn an_either_phi_whose_last_array_an_outer_phi_holds_over_lets_go_at_the_return_only() {
        // The phi after the loop in an outer loop's header, read in the
        // outer loop after the inner loop has run again: the inner phi's
        // last array may be read then, so it is let go of at the return
        // only, never when the inner loop is entered again.
        let src = EITHER_LOOP.replace(
            "func @f(%n: i64, %x: [f64]) -> f64 {
#1:
  goto #2
#2:
  %p = phi [#1 => %x, #3 => %t] :: [f64]
  %i = phi [#1 => 0, #3 => %j] :: i64
  %c = call lt(%i, %n) :: bool
  gotoifnot %c, #4
#3:
  %t = invoke @g(%p, %i) :: [f64]
  %j = call iadd(%i, 1) :: i64
  goto #2
#4:
  %z = call arrayref(%p, 0) :: f64
  return %z
}",
            "func @f(%n: i64, %x: [f64], %y: [f64]) -> f64 {
#1:
  goto #5
#5:
  %l = phi [#1 => %y, #4 => %p] :: [f64]
  %o = phi [#1 => 0, #4 => %u] :: i64
  %s = phi [#1 => 0.0, #4 => %v] :: f64
  %b = call lt(%o, 3) :: bool
  gotoifnot %b, #6
#7:
  goto #2
#2:
  %p = phi [#7 => %x, #3 => %t] :: [f64]
  %i = phi [#7 => 0, #3 => %j] :: i64
  %c = call lt(%i, %n) :: bool
  gotoifnot %c, #4
#3:
  %t = invoke @g(%p, %i) :: [f64]
  %j = call iadd(%i, 1) :: i64
  goto #2
#4:
  %w = call arrayref(%l, 0) :: f64
  %v = call add(%s, %w) :: f64
  %u = call iadd(%o, 1) :: i64
  goto #5
#6:
  %z = call arrayref(%l, 1) :: f64
  return %z
}",
        );
        assert_eq!(freed(&src), ["p", "t:handed"]);
        assert_eq!(latch_phis(&src), ["p:leaves:at_return"]);
    }

    #[test]
    fn a_parameter_passed_on_to_one_a_callee_only_pushes_is_pushed_itself() {
        // `@rec` passes `a` on to itself, and pushes it at the bottom: a
        // greatest fixpoint finds it pushed ("Pushed parameters passed
        // on"). `@mid` passes its `a` on to `@rec`'s and reads it: pushed
        // too; `@sel` passes a `select` of it: kept. A loop's phi passed
        // to `@mid` owns the arrays its latch brings, which `@mid` pushes.
        let src = "func @rec(%a: [f64], %k: i64) -> () {
#1:
  %z = call eq(%k, 0) :: bool
  gotoifnot %z, #3
#2:
  call push(%a)
  return ()
#3:
  %k1 = call isub(%k, 1) :: i64
  invoke @rec(%a, %k1)
  return ()
}
func @mid(%a: [f64], %k: i64) -> f64 {
#1:
  invoke @rec(%a, %k)
  %x = call arrayref(%a, 0) :: f64
  return %x
}
func @sel(%a: [f64], %c: bool) -> () {
#1:
  %s = call select(%c, %a, %a) :: [f64]
  invoke @rec(%s, 1)
  return ()
}
func @f(%x: [f64], %n: i64) -> f64 {
#1:
  goto #2
#2:
  %p = phi [#1 => %x, #3 => %r] :: [f64]
  %i = phi [#1 => 0, #3 => %j] :: i64
  %c = call lt(%i, %n) :: bool
  gotoifnot %c, #4
#3:
  %y = invoke @mid(%p, %i) :: f64
  %r = call copy(%p) :: [f64]
  %j = call iadd(%i, 1) :: i64
  goto #2
#4:
  return 0.0
}
";
        let (_, sums, ids) = summaries_of(src, &["rec", "mid", "sel"]);
        let pushed: Vec<Vec<bool>> = ids.iter().map(|g| sums.pushed[g].clone()).collect();
        assert_eq!(
            pushed,
            [vec![true, false], vec![true, false], vec![false, false]]
        );
        assert_eq!(freed(src), ["p:release", "r:release:handed"]);
        // Passed tagged; `@sel` masks nothing.
        let m = parse_module(src).expect("parses");
        let mut sums = Summaries::default();
        let masked: Vec<Vec<bool>> = ["rec", "mid", "sel"]
            .iter()
            .map(|n| sums.masked_params(&m, m.by_name(n).expect("function")))
            .collect();
        assert_eq!(masked, pushed);
    }

    #[test]
    fn a_callees_fresh_array_pushed_and_returned_is_fresh_and_pushed() {
        // `@wrap` pushes the fresh array `@make` returns and returns it: a
        // fresh leaf, pushed ("Fresh results pushed on"), the push counted
        // (a tagged word). `@leak` also returns it in a second field: not
        // fresh.
        let src = "func @make(%a: [f64]) -> ([f64], f64) {
#1:
  %b = call copy(%a) :: [f64]
  %t = call tuple(%b, 1.0) :: ([f64], f64)
  return %t
}
func @wrap(%a: [f64]) -> ([f64], f64) {
#1:
  %t = invoke @make(%a) :: ([f64], f64)
  %b = call getfield(%t, 0) :: [f64]
  %s = call getfield(%t, 1) :: f64
  call push(%b)
  %u = call tuple(%b, %s) :: ([f64], f64)
  return %u
}
func @leak(%a: [f64]) -> ([f64], [f64]) {
#1:
  %t = invoke @make(%a) :: ([f64], f64)
  %b = call getfield(%t, 0) :: [f64]
  call push(%b)
  %u = call tuple(%b, %b) :: ([f64], [f64])
  return %u
}
";
        let (m, sums, ids) = summaries_of(src, &["make", "wrap", "leak"]);
        assert_eq!(sums.fresh(ids[0], &[0]), Fresh::Made { pushed: false });
        assert_eq!(sums.fresh(ids[1], &[0]), Fresh::Made { pushed: true });
        assert_eq!(sums.fresh(ids[2], &[0]), Fresh::No);
        assert_eq!(sums.fresh(ids[2], &[1]), Fresh::No);
        let mut m = m;
        m.set_counted_tapes(true);
        let wrap = m.get(ids[1]).expect("func");
        let freed = freed_sites(wrap, &m, &mut Summaries::default());
        let pushes = counted_pushes(wrap, &freed);
        assert_eq!(
            pushes.values().copied().collect::<Vec<_>>(),
            [Letgo::Release]
        );
    }

    #[test]
    fn an_owning_phi_takes_the_copy_a_call_hands_back() {
        // `@nudge` writes the array it is given and hands it back (an
        // either leaf holding nothing but its parameter); `@kick` hands
        // back both it is given, in a tuple inside its result's. The
        // loops carry a copy made in every iteration and passed there: the
        // phi takes it, so the copy is handed over to the phi, an owning
        // one, as its entry is ("Handed back by a call"). `@nudge`'s parameter is at `[]`, `@kick`'s at `[0, 0]`
        // and `[0, 1]`.
        let src = "func @nudge(%a: [f64]) -> [f64] {
#1:
  %x = call arrayref(%a, 1) :: f64
  call arrayset(%a, 0, %x)
  call push(%a)
  return %a
}
func @kick(%q: [f64], %v: [f64]) -> (([f64], [f64]), f64) {
#1:
  %x = call arrayref(%v, 0) :: f64
  call arrayset(%q, 0, %x)
  call push(%q)
  %t = call tuple(%q, %v) :: ([f64], [f64])
  %u = call tuple(%t, %x) :: (([f64], [f64]), f64)
  return %u
}
func @f(%x: [f64], %w: [f64], %n: i64) -> f64 {
#1:
  %a0 = call copy(%x) :: [f64]
  %q0 = call copy(%x) :: [f64]
  goto #2
#2:
  %a = phi [#1 => %a0, #3 => %r] :: [f64]
  %q = phi [#1 => %q0, #3 => %q2] :: [f64]
  %i = phi [#1 => 0, #3 => %j] :: i64
  %c = call lt(%i, %n) :: bool
  gotoifnot %c, #4
#3:
  %b = call copy(%a) :: [f64]
  %r = invoke @nudge(%b) :: [f64]
  %d = call copy(%q) :: [f64]
  %u = invoke @kick(%d, %w) :: (([f64], [f64]), f64)
  %t = call getfield(%u, 0) :: ([f64], [f64])
  %q2 = call getfield(%t, 0) :: [f64]
  %v2 = call getfield(%t, 1) :: [f64]
  %j = call iadd(%i, 1) :: i64
  goto #2
#4:
  %y = call arrayref(%a, 0) :: f64
  return %y
}
";
        let (_, sums, ids) = summaries_of(src, &["nudge", "kick"]);
        let leaf =
            |g: FuncId, path: &[usize]| sums.either(g, path).map(|e| (e.param, e.only_param));
        assert_eq!(leaf(ids[0], &[]), Some((0, true)));
        assert_eq!(leaf(ids[1], &[0, 0]), Some((0, true)));
        assert_eq!(leaf(ids[1], &[0, 1]), Some((1, true)));
        assert_eq!(leaf(ids[1], &[0]), None);
        let mut got = freed(src);
        got.sort();
        assert_eq!(
            got,
            [
                "a0:release:handed",
                "a:release",
                "b:release:handed",
                "d:release:handed",
                "q0:release:handed",
                "q:release"
            ]
        );
    }
}
