//! The JIT: compiles functions of a module in process and calls them with the
//! interpreter's values, reporting the interpreter's errors.
//!
//! [`Jit::run`] compiles the function called and everything it can reach
//! (static callees, function constants, function values among the arguments)
//! on first use, then calls it through a trampoline of fixed signature.
//! Function values met at run time whose rules are not built yet
//! (`frule`, `revfwd`, `revback`) are derived by the [`RuleProvider`], compiled
//! and cached in the middle of the run (the rule function `irad_rule` calls back
//! into the JIT).
//!
//! A JIT has two halves (`code`): the shared one (the compiler, the rule
//! provider, and a snapshot of what is compiled that calls read without a
//! lock) and the per-call one (the runtime context: tapes, arena, own
//! stack). A [`Jit`] has one of each and runs through `&mut self`; a
//! [`SharedJit`] (`shared`) owns its module and provider, is `Send + Sync`,
//! and gives each call, or each [`JitSession`], a context of its own from a
//! pool, so that many threads call it at once.
//!
//! Arrays passed in are shared with compiled code (in-place writes are seen by
//! the caller, as with the interpreter). Arrays compiled code allocates live
//! in the runtime's arena: results are copied out, and the arena is freed after
//! a call that leaves every tape empty (values left on tapes, as by a forward
//! sweep run alone, keep the arena and the argument arrays alive until a later
//! call empties the tapes).

mod code;
mod shared;
mod stack;

use crate::CodegenError;
use code::{Code, Local, Provider};
use irad_ir::func::{FuncId, FuncRef, Module};
use irad_ir::interp::{ArrayRef, Executor, RuleProvider, RunError, RunOptions, Val};
pub use shared::{Entry, JitSession, Scratch, SharedJit};

/// How much native stack compiled code may use, unless set with
/// [`Jit::set_stack_budget`] or [`set_thread_stack_budget`]: 256 MiB, enough
/// for the default call-depth limit (100 000) with frames of 2.6 KiB, and for
/// depth 10 000 with frames of 26 KiB. When the calling thread has less
/// stack left (a spawned thread has 2 MiB), [`Jit::run`] runs compiled code
/// on a stack of its own (`stacker`); the memory is reserved, and only what
/// is used is committed.
pub const DEFAULT_STACK_BUDGET: usize = 256 << 20;

/// Stack kept free below the budget, for the frame of the callee of the last
/// checked call and for the runtime (rule derivation compiles code there).
const STACK_MARGIN: usize = 1 << 20;

/// Address space reserved for one JIT's compiled code (committed only as
/// used): less than the 2 GiB a direct call can span.
const CODE_RESERVE: usize = 1 << 30;

thread_local! {
    static STACK_BUDGET: std::cell::Cell<usize> = const { std::cell::Cell::new(DEFAULT_STACK_BUDGET) };
}

/// Sets the stack budget of JITs made on this thread from now on.
pub fn set_thread_stack_budget(bytes: usize) {
    STACK_BUDGET.with(|b| b.set(bytes));
}

/// The stack budget of JITs made on this thread now.
fn thread_stack_budget() -> usize {
    STACK_BUDGET.with(std::cell::Cell::get)
}

/// The [`irad_ir::interp::MakeExecutor`] of the JIT: compiled code for the
/// gradient functions of the AD passes.
pub fn jit_with_rules<'m>(
    module: &'m mut Module,
    provider: &'m mut dyn RuleProvider,
) -> Result<Box<dyn Executor + 'm>, RunError> {
    let jit = Jit::with_rules(module, provider).map_err(|e| RunError::new(e.loc, e.msg))?;
    Ok(Box::new(jit))
}

impl Executor for Jit<'_> {
    fn run(&mut self, f: FuncId, args: &[Val], opts: &RunOptions) -> Result<Val, RunError> {
        Jit::run(self, f, args, opts)
    }
}

/// A JIT for one module, with one runtime context kept between runs (tapes
/// left by one run are there for the next); see the module documentation.
pub struct Jit<'m> {
    /// Boxed: large, and its address is in every running context.
    code: Box<Code<'m>>,
    local: Local,
    /// Argument arrays kept alive while tapes hold values.
    pinned: Vec<ArrayRef>,
}

impl<'m> Jit<'m> {
    /// A JIT for `module`, without rules for function values (`frule`,
    /// `revfwd` and `revback` fail as in the interpreter).
    pub fn new(module: &'m Module) -> Result<Jit<'m>, CodegenError> {
        Jit::make(Code::new(Ok(module), None, None, thread_stack_budget())?)
    }

    /// A JIT for `module` that asks `provider` for the rules of function values
    /// met at run time and compiles them. The JIT takes the module's
    /// functions (no copy: a gradient's module can be most of the memory)
    /// and adds the rules to them; `module` gets them back, with the rules,
    /// when the JIT is dropped.
    pub fn with_rules(
        module: &'m mut Module,
        provider: &'m mut dyn RuleProvider,
    ) -> Result<Jit<'m>, CodegenError> {
        // Made first: a failure leaves `module` as it was.
        let comp = Code::compiler()?;
        let taken = std::mem::take(module);
        Jit::make(Code::with_compiler(
            comp,
            Err(taken),
            Some(Provider::Borrowed(provider)),
            Some(module),
            thread_stack_budget(),
        ))
    }

    /// A JIT that owns `module` and, when given, the provider of the rules
    /// of function values: for callers that keep compiled code around (an
    /// embedding compiler), with no borrow to keep alive. [`SharedJit`] is
    /// the same for many threads.
    pub fn owning(
        module: Module,
        provider: Option<Box<dyn RuleProvider + 'm>>,
    ) -> Result<Jit<'m>, CodegenError> {
        Jit::make(Code::new(
            Err(module),
            provider.map(Provider::Owned),
            None,
            thread_stack_budget(),
        )?)
    }

    fn make(code: Code<'m>) -> Result<Jit<'m>, CodegenError> {
        Ok(Jit {
            code: Box::new(code),
            local: Local::new(),
            pinned: Vec::new(),
        })
    }

    /// The module, with every rule added so far.
    pub fn module(&self) -> &Module {
        self.code.snap().module()
    }

    /// Sets how much native stack compiled code may use (see
    /// [`DEFAULT_STACK_BUDGET`]); deeper calls fail with a "native stack
    /// exhausted" error instead of overflowing.
    pub fn set_stack_budget(&mut self, bytes: usize) {
        self.code.stack_budget = bytes;
    }

    /// Sets the limits within which compiled functions get their small
    /// non-recursive callees inlined (docs/codegen.md, "Inlining"); `None`
    /// turns inlining off. The default is `Some(Limits::default())`. Either
    /// way the results and errors are the same. Only a setting made before
    /// the first function is compiled takes effect: the analysis that frees
    /// arrays summarises each function as inlined by the limits it first
    /// saw, and every function is compiled so.
    pub fn set_inlining(&mut self, limits: Option<irad_passes::pe::Limits>) {
        self.code.inner_mut().comp.inline = limits;
    }

    /// Whether functions compiled from now on version loops whose array
    /// accesses cannot be proven in range (on by default), and which loops
    /// they run in vectors (docs/codegen.md, "Bounds checks" and
    /// "Vectorisation"). Either way the results and errors are the same:
    /// for measuring what each does, and for tests.
    pub fn set_loop_opts(&mut self, version: bool, vectors: crate::LoopVectors) {
        let comp = &mut self.code.inner_mut().comp;
        comp.version_loops = version;
        comp.vectorise = vectors;
    }

    /// Whether functions compiled from now on fuse adjacent counted loops
    /// over the same range (on by default; docs/codegen.md, "Loop
    /// fusion"). Either way the results and errors are the same: for
    /// measuring what it does, and for tests.
    pub fn set_loop_fusion(&mut self, on: bool) {
        self.code.inner_mut().comp.fuse_loops = on;
    }

    /// From now on, keeps the Cranelift IR of every function compiled, as
    /// Cranelift's optimiser leaves it (before register allocation), for
    /// [`Jit::take_clif`]: what `irad dump --format clif` prints.
    pub fn capture_clif(&mut self) {
        self.code.inner_mut().comp.clif.get_or_insert_with(Vec::new);
    }

    /// From now on, measures the [`Shape`](crate::Shape) of every function
    /// compiled (trampolines included) as lowering hands it to Cranelift,
    /// for [`Jit::take_shapes`]: for tests and diagnostics of compile time.
    pub fn capture_shapes(&mut self) {
        self.code
            .inner_mut()
            .comp
            .shapes
            .get_or_insert_with(Vec::new);
    }

    /// The shapes measured since [`Jit::capture_shapes`] (or the last
    /// call), one per function compiled, in the order they were compiled.
    pub fn take_shapes(&mut self) -> Vec<crate::Shape> {
        self.code
            .inner_mut()
            .comp
            .shapes
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// The Cranelift IR kept since [`Jit::capture_clif`] (or the last
    /// call), one `(name, text)` per function compiled, in the order they
    /// were compiled: `name` is the IR function's name (`gmm.rev.fwd`) or
    /// a primitive's wrapper's.
    pub fn take_clif(&mut self) -> Vec<(String, String)> {
        self.code
            .inner_mut()
            .comp
            .clif
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
            .into_iter()
            .map(|(name, func)| (name, func.display().to_string()))
            .collect()
    }

    /// Compiles `f` and everything it can reach, if not done yet.
    pub fn compile(&mut self, f: FuncId) -> Result<(), CodegenError> {
        self.code.compile(FuncRef::User(f)).map(|_| ())
    }

    /// Bytes on all tapes now.
    pub fn tape_bytes(&self) -> u64 {
        self.local.rt.tape_bytes()
    }

    /// How many arrays compiled code has freed itself, before the run
    /// ended, since this JIT was made (docs/codegen.md, "Freeing arrays").
    pub fn arrays_freed(&self) -> u64 {
        self.local.rt.arena.frees()
    }

    /// The most arrays of compiled code live at once since this JIT was
    /// made: what freeing them bounds (docs/codegen.md, "Freeing arrays").
    pub fn arrays_peak(&self) -> usize {
        self.local.rt.arena.peak()
    }

    /// Runs `f` on `args` as [`irad_ir::interp::run`] does, in compiled code.
    /// Code generation failures are reported as run errors whose message
    /// starts with `code generation failed` or `cannot compile`.
    pub fn run(&mut self, f: FuncId, args: &[Val], opts: &RunOptions) -> Result<Val, RunError> {
        self.code
            .run(&mut self.local, &mut self.pinned, f, args, opts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use irad_ir::prim::Prim;

    /// `@f` calls `@g`, which fails to lower at its `sin`: after the cold
    /// blocks of an `idiv`, in the middle of its second block.
    const CALLS_G: &str = r"
func @f(%x: f64, %k: i64) -> f64 {
#1:
  %y = invoke @g(%x, %k) :: f64
  %z = call mul(%y, 2.0) :: f64
  return %z
}

func @g(%x: f64, %k: i64) -> f64 {
#1:
  %q = call idiv(10, %k) :: i64
  %c = call lt(%q, 3) :: bool
  gotoifnot %c, #3
#2:
  %t = call mul(%x, %x) :: f64
  %s = call sin(%t) :: f64
  return %s
#3:
  return %x
}
";

    /// A sum over `a[i * d + j]`, `j` the inner loop: `i * d` is invariant
    /// in it.
    const ROWS: &str = r"
func @rows(%a: [f64], %n: i64, %d: i64) -> f64 {
#1:
  goto #2
#2:
  %i = phi [#1 => 0, #6 => %i1]
  %s = phi [#1 => 0.0, #6 => %s2]
  %c = call lt(%i, %n) :: bool
  gotoifnot %c, #7
#3:
  goto #4
#4:
  %j = phi [#3 => 0, #5 => %j1]
  %s2 = phi [#3 => %s, #5 => %t]
  %k = call lt(%j, %d) :: bool
  gotoifnot %k, #6
#5:
  %r = call imul(%i, %d) :: i64
  %x = call iadd(%r, %j) :: i64
  %v = call arrayref(%a, %x) :: f64
  %t = call add(%s2, %v) :: f64
  %j1 = call iadd(%j, 1) :: i64
  goto #4
#6:
  %i1 = call iadd(%i, 1) :: i64
  goto #2
#7:
  return %s
}
";

    #[test]
    fn error_returns_are_shared_by_few_checks() {
        // 40 checked reads: one shared error return would have 40
        // predecessors along a chain of 40 blocks, which made the dominator
        // computations quadratic in the function's length
        // (docs/codegen.md, "Errors").
        let mut text = String::from(
            "func @many(%a: [f64], %i: i64) -> f64 {\n#1:\n  %s0 = call add(0.0, 0.0) :: f64\n",
        );
        for k in 0..40 {
            text.push_str(&format!(
                "  %j{k} = call imul(%i, {}) :: i64\n  %x{k} = call arrayref(%a, %j{k}) :: f64\n  %s{} = call add(%s{k}, %x{k}) :: f64\n",
                k + 1,
                k + 1
            ));
        }
        text.push_str("  return %s40\n}\n");
        let module = irad_ir::text::parse_module(&text).expect("test IR parses");
        let f = module.by_name("many").expect("@many");
        let mut jit = Jit::new(&module).expect("a JIT");
        jit.capture_clif();
        jit.compile(f).expect("@many compiles");
        let funcs = jit.code.inner_mut().comp.clif.take().expect("captured");
        let (_, func) = funcs.first().expect("one function");
        let cfg = cranelift_codegen::flowgraph::ControlFlowGraph::with_function(func);
        let most = func
            .layout
            .blocks()
            .map(|b| cfg.pred_iter(b).count())
            .max()
            .unwrap_or(0);
        assert!(
            most <= 16,
            "a block with {most} predecessors:\n{}",
            func.display()
        );
        // The checks still fail as the interpreter does.
        let args = [Val::f64_array(vec![1.0, 2.0]), Val::I64(1)];
        let got = jit.run(f, &args, &RunOptions::default());
        let want = irad_ir::interp::run(&module, f, &args, &RunOptions::default());
        let (got, want) = (
            got.expect_err("out of range"),
            want.expect_err("out of range"),
        );
        assert_eq!(got, want);
        let args = [Val::f64_array(vec![1.0, 2.0]), Val::I64(0)];
        let got = jit.run(f, &args, &RunOptions::default()).expect("in range");
        assert!(got.same(&Val::F64(40.0)), "{got:?}");
    }

    #[test]
    fn loop_invariants_are_hoisted_out_of_inner_loops() {
        // Cranelift's optimiser hoists `i * d` out of the inner loop only
        // when the header's branch lists the body second (docs/codegen.md,
        // "Loops"): after it, the `imul` is in a block of loop depth 1.
        let module = irad_ir::text::parse_module(ROWS).expect("test IR parses");
        let f = module.by_name("rows").expect("@rows");
        let mut jit = Jit::new(&module).expect("a JIT");
        jit.capture_clif();
        jit.compile(f).expect("@rows compiles");
        let funcs = jit.code.inner_mut().comp.clif.take().expect("captured");
        let (name, func) = funcs.first().expect("one function");
        assert_eq!(name, "@rows");
        let cfg = cranelift_codegen::flowgraph::ControlFlowGraph::with_function(func);
        let dom = cranelift_codegen::dominator_tree::DominatorTree::with_function(func, &cfg);
        let mut loops = cranelift_codegen::loop_analysis::LoopAnalysis::new();
        loops.compute(func, &cfg, &dom);
        let depth = |op: cranelift_codegen::ir::Opcode| -> Vec<usize> {
            func.layout
                .blocks()
                .filter(|&b| {
                    func.layout
                        .block_insts(b)
                        .any(|i| func.dfg.insts[i].opcode() == op)
                })
                .map(|b| loops.loop_level(b).level())
                .collect()
        };
        assert_eq!(
            depth(cranelift_codegen::ir::Opcode::Imul),
            [1],
            "{}",
            func.display()
        );
        // The element load stays in the inner loop.
        assert_eq!(
            depth(cranelift_codegen::ir::Opcode::Load).iter().max(),
            Some(&2)
        );
        // And the result is the sum.
        let args = [
            Val::f64_array((0..6).map(f64::from).collect()),
            Val::I64(2),
            Val::I64(3),
        ];
        let got = jit
            .run(f, &args, &RunOptions::default())
            .expect("@rows runs");
        assert!(matches!(got, Val::F64(v) if v == 15.0), "{got:?}");
    }

    #[test]
    fn vector_loads_and_stores_are_not_marked_aligned() {
        // a[i], a[i + 1] is 16-byte aligned only for even i: an `aligned`
        // f64x2 load may become an SSE memory operand, which faults on a
        // machine without AVX (docs/codegen.md, "Vectorisation").
        let text = "fn from_one(a: [f64]) -> [f64] {
            let c = copy(a);
            for i in 1..len(a) {
                c[i] = c[i] * 3.0 - a[i];
            }
            c
        }";
        let module = irad_ir::surface::compile(text).expect("test program compiles");
        let f = module.by_name("from_one").expect("@from_one");
        let mut jit = Jit::new(&module).expect("a JIT");
        jit.capture_clif();
        jit.compile(f).expect("compiles");
        let clif = jit
            .take_clif()
            .into_iter()
            .map(|(_, t)| t)
            .collect::<String>();
        let pairs: Vec<&str> = clif
            .lines()
            .filter(|l| l.contains("load.f64x2") || (l.contains("store") && l.contains("f64x2")))
            .collect();
        assert!(!pairs.is_empty(), "the loop is vectorised:\n{clif}");
        for line in pairs {
            assert!(!line.contains("aligned"), "{line}");
        }
        let args = [Val::f64_array(vec![1.0, 2.0, 3.0, 4.0, 5.0])];
        let got = jit.run(f, &args, &RunOptions::default()).expect("runs");
        assert!(
            matches!(&got, Val::Array(a) if format!("{a:?}").contains("4.0, 6.0, 8.0, 10.0")),
            "{got:?}"
        );
    }

    #[test]
    fn a_failure_half_way_through_a_function_is_an_error_every_time() {
        // Once a panic in Cranelift's `finalize` (blocks without a
        // terminator), then one resolving `@f`'s call of the undefined `@g`.
        let module = irad_ir::text::parse_module(CALLS_G).expect("test IR parses");
        let f = module.by_name("f").expect("@f");
        let args = [Val::F64(0.5), Val::I64(5)];
        let opts = RunOptions::default();
        let mut jit = Jit::new(&module).expect("a JIT");
        jit.code.inner_mut().comp.fail_at = Some(Prim::Sin);
        for attempt in 0..2 {
            let err = jit.run(f, &args, &opts).expect_err("lowering fails");
            assert_eq!(
                err.msg, "internal error: `sin` fails for the test",
                "attempt {attempt}"
            );
        }
        // `@g` stayed pending and is compiled once it can be.
        jit.code.inner_mut().comp.fail_at = None;
        let want = irad_ir::interp::run(&module, f, &args, &opts).expect("the interpreter runs");
        let got = jit.run(f, &args, &opts).expect("compiled code runs");
        assert_eq!(format!("{got:?}"), format!("{want:?}"));
        assert!(
            matches!(got, Val::F64(y) if y == irad_runtime::math::sin(0.25) * 2.0),
            "{got:?}"
        );
    }
}
