//! Activity analysis: which values of a function carry derivative information
//! that reaches its result, so that the AD transforms give every other value
//! no tangent (forward mode) and no cotangent work (reverse mode).
//!
//! A value is *varied* when it depends on an active parameter (the ones being
//! differentiated; `--wrt` chooses them for a gradient), and *useful* when
//! the function's outputs depend on it; it is *active* when it is both. Only
//! values of *tracked* types are ever inactive: types with a tangent that hold
//! no array and no function value (`f64`, tuples of f64 with i64/bool); the
//! others still get varied and useful marks, through which derivatives flow
//! to what is read out of them (a tuple of a function value and an f64). Every
//! value whose type holds an array is active (its shadow or tangent array is
//! the derivative of memory that other values may read), and values without a
//! tangent type carry no derivative anyway.
//!
//! Dependence through memory is tracked per *array class*: the `[f64]` values
//! (and tuples holding them) that may be the same array, joined through phis,
//! `select`, tuples, `getfield` and call results. Distinct parameters are
//! assumed not to alias (irad's gradients pass fresh copies). A class is
//! varied when it holds an active parameter or a varied value is written into
//! it (`arrayset`, `copy` of a varied class, or a call that may write a varied
//! value into its array arguments); a read (`arrayref`) is varied when its
//! class is. A class is useful when it holds a parameter (a caller sees the
//! array and its derivative) or the result, or when a useful value is read
//! from it; a write into a useful class makes the written value useful.
//! Calls of user functions and function values are opaque: any varied input
//! varies the result and every array argument, and a useful result or array
//! argument makes every argument useful.
//!
//! Assumes a verified function. Guarantees: the analysis is conservative (a
//! value it calls inactive has a zero derivative, or one the result cannot
//! see), runs in time linear in the function's size per round of its two
//! fixpoints (rounds are bounded by the number of values), and never panics.

use irad_ir::entity::EntityRef;
use irad_ir::{Func, Inst, InstKind, Operand, Prim, Type, Value};
use smallvec::SmallVec;

/// The result of the analysis for one function.
#[derive(Clone, Debug)]
pub struct Activity {
    /// Per value (by index): whether it is active.
    active: Vec<bool>,
    /// Per value (by index): whether its type is tracked.
    tracked: Vec<bool>,
    /// Per value (by index): for a `[f64]` value, whether its array class is
    /// varied and useful; true for every other value.
    array_active: Vec<bool>,
}

impl Activity {
    /// Everything with a tangent type active: the result of no analysis.
    pub fn all(func: &Func) -> Activity {
        let active = func.values.values().map(|d| d.ty.has_cotangent()).collect();
        let tracked = func.values.values().map(|d| tracked(&d.ty)).collect();
        Activity {
            active,
            tracked,
            array_active: vec![true; func.values.len()],
        }
    }

    /// The activity of `func`'s values when the parameters with `params[i]`
    /// true are active (missing entries count as active).
    pub fn of(func: &Func, params: &[bool]) -> Activity {
        Analysis::new(func, params).run()
    }

    /// Whether `v` is active: its derivative matters.
    pub fn is_active(&self, v: Value) -> bool {
        self.active.get(v.index()).copied().unwrap_or(true)
    }

    /// Whether operand `op` is an active value (a constant never is).
    pub fn is_active_op(&self, op: &Operand) -> bool {
        match op {
            Operand::Value(v) => self.is_active(*v),
            Operand::Const(_) => false,
        }
    }

    /// Whether a rule should propagate cotangents into operand `op`: for a
    /// tracked value, whether it is active ([`Activity::is_active_op`]); for
    /// a `[f64]` array, whether its array class is both varied and useful
    /// (otherwise whatever a pullback adds into its shadow never reaches an
    /// active parameter, or is zero); false for a constant. The reverse
    /// transform passes it to rules as [`irad_rules::RevArg::active`], so the
    /// bulk primitives' pullbacks skip matrix products for arrays such as
    /// input data that is not differentiated.
    pub fn wants_cotangent(&self, op: &Operand) -> bool {
        match op {
            Operand::Value(v) => {
                self.is_active(*v) && self.array_active.get(v.index()).copied().unwrap_or(true)
            }
            Operand::Const(_) => false,
        }
    }

    /// Whether `v` has a tracked type and is inactive: the transforms give it
    /// no tangent and no cotangent.
    pub fn is_inactive(&self, v: Value) -> bool {
        self.tracked.get(v.index()).copied().unwrap_or(false) && !self.is_active(v)
    }

    /// Whether statement `inst` of `func` needs no derivative work at all, so
    /// that the AD transforms emit its primal statement alone: its result is
    /// inactive and it cannot write into an array (a call with array
    /// arguments might, and must go through its rule so that the derivatives
    /// of the arrays follow).
    pub fn primal_only(&self, func: &Func, inst: Inst) -> bool {
        let data = &func.insts[inst];
        let Some(r) = data.result else { return false };
        if !self.is_inactive(r) {
            return false;
        }
        match &data.kind {
            InstKind::Prim { prim, .. } => !prim.is_ad(),
            InstKind::Phi { .. } => true,
            InstKind::Invoke { args, .. } | InstKind::CallValue { args, .. } => {
                args.iter().all(|op| match op {
                    Operand::Value(v) => !func.values[*v].ty.holds_array(),
                    Operand::Const(_) => true,
                })
            }
        }
    }

    /// How many values of a tracked type are inactive.
    pub fn inactive_count(&self) -> usize {
        self.active
            .iter()
            .zip(&self.tracked)
            .filter(|&(&a, &t)| t && !a)
            .count()
    }
}

/// Which parameters of `func` a gradient with respect to the positions in
/// `wrt` makes active: those in `wrt`, and those without a tangent type (they
/// carry no derivative either way, so a rule for them need not differ).
pub fn wrt_mask(func: &Func, wrt: &[usize]) -> Vec<bool> {
    func.params
        .iter()
        .enumerate()
        .map(|(i, &p)| wrt.contains(&i) || !func.values[p].ty.has_cotangent())
        .collect()
}

/// Whether values of type `ty` can be inactive: a tangent type without arrays
/// or function values inside.
pub fn tracked(ty: &Type) -> bool {
    if !ty.has_cotangent() {
        return false;
    }
    let mut stack: SmallVec<[&Type; 8]> = smallvec::smallvec![ty];
    while let Some(t) = stack.pop() {
        match t {
            Type::Array(_) | Type::Func(_) => return false,
            Type::Tuple(elems) => stack.extend(elems.iter()),
            Type::Dual(inner, _) => stack.push(inner),
            _ => {}
        }
    }
    true
}

/// How a statement moves derivative information, for both fixpoints.
enum Flow {
    /// Result depends on every operand (pure primitives, phis, tuples).
    Pure,
    /// `arrayref(a, i)`: the result depends on the class of `a`.
    Read,
    /// `arrayset(a, i, x)`: `x` flows into the class of `a`.
    Write,
    /// `copy(a)`: the result's class gets the contents of `a`'s class.
    Copy,
    /// A new array (`alloc`, `zeros`): depends on nothing.
    Fresh,
    /// A bulk array primitive: its result and the array it writes (the
    /// operand at this position, if any) depend on every operand.
    Bulk(Option<usize>),
    /// A call, or a primitive this analysis does not know: any input may flow
    /// to the result and into every array argument.
    Opaque,
    /// `pop() :: T`: the value comes off a tape, from a push in another
    /// function (a forward sweep): always varied, and a popped array is
    /// always useful (the pushing function's caller sees it).
    Pop,
    /// `push(v)`: the value goes on a tape, for a pop in another function
    /// (a pullback): always useful.
    Push,
}

/// The state of one analysis.
struct Analysis<'a> {
    func: &'a Func,
    params: &'a [bool],
    /// Statements in layout order.
    insts: Vec<Inst>,
    /// Union-find parents over value indices (array classes).
    parent: Vec<u32>,
    tracked: Vec<bool>,
    /// Per value: whether its type has a tangent or a cotangent (so
    /// derivatives can pass through it, tracked or not: a tuple holding a
    /// function value, a dual under reverse mode).
    carries: Vec<bool>,
    arrays: Vec<bool>,
    varied: Vec<bool>,
    useful: Vec<bool>,
}

impl<'a> Analysis<'a> {
    fn new(func: &'a Func, params: &'a [bool]) -> Analysis<'a> {
        let n = func.values.len();
        let insts = func
            .layout
            .iter()
            .flat_map(|&b| func.blocks[b].insts.iter().copied())
            .collect();
        Analysis {
            func,
            params,
            insts,
            parent: (0..n as u32).collect(),
            tracked: func.values.values().map(|d| tracked(&d.ty)).collect(),
            carries: func
                .values
                .values()
                .map(|d| d.ty.has_tangent() || d.ty.has_cotangent())
                .collect(),
            arrays: func.values.values().map(|d| d.ty.holds_array()).collect(),
            varied: vec![false; n],
            useful: vec![false; n],
        }
    }

    fn run(mut self) -> Activity {
        self.classes();
        self.vary();
        self.use_();
        let active = self
            .func
            .values
            .values()
            .enumerate()
            .map(|(i, d)| {
                if self.tracked[i] {
                    self.varied[i] && self.useful[i]
                } else {
                    d.ty.has_cotangent()
                }
            })
            .collect();
        let f64_arrays: Vec<bool> = self
            .func
            .values
            .values()
            .map(|d| d.ty == Type::Array(irad_ir::Scalar::F64))
            .collect();
        let array_active = f64_arrays
            .iter()
            .enumerate()
            .map(|(i, &is_array)| {
                if is_array {
                    let c = self.find(i as u32) as usize;
                    self.varied[c] && self.useful[c]
                } else {
                    true
                }
            })
            .collect();
        Activity {
            active,
            tracked: self.tracked,
            array_active,
        }
    }

    fn find(&mut self, mut x: u32) -> u32 {
        while self.parent[x as usize] != x {
            let p = self.parent[x as usize];
            self.parent[x as usize] = self.parent[p as usize];
            x = p;
        }
        x
    }

    fn union(&mut self, a: Value, b: Value) {
        let (ra, rb) = (self.find(a.index() as u32), self.find(b.index() as u32));
        if ra != rb {
            self.parent[ra as usize] = rb;
        }
    }

    /// The flow of statement `inst`.
    fn flow(&self, inst: Inst) -> Flow {
        match &self.func.insts[inst].kind {
            InstKind::Phi { .. } => Flow::Pure,
            InstKind::Invoke { .. } | InstKind::CallValue { .. } => Flow::Opaque,
            InstKind::Prim { prim, .. } => match prim {
                Prim::Arrayref => Flow::Read,
                Prim::Arrayset => Flow::Write,
                Prim::Copy => Flow::Copy,
                Prim::Alloc | Prim::Zeros => Flow::Fresh,
                Prim::Pop => Flow::Pop,
                Prim::Push => Flow::Push,
                // Building and taking apart duals (reverse over forward)
                // moves values like `tuple` and `getfield`.
                Prim::Dual | Prim::Primal | Prim::Tangent => Flow::Pure,
                p if p.is_ad() => Flow::Opaque,
                p if p.bulk().is_some() => Flow::Bulk(p.bulk_output()),
                _ => Flow::Pure,
            },
        }
    }

    /// The operands of a statement (phi entries included), inline up to
    /// four: the fixpoints call this per statement per round.
    fn operands(&self, inst: Inst) -> SmallVec<[Operand; 4]> {
        match &self.func.insts[inst].kind {
            InstKind::Prim { args, .. } | InstKind::Invoke { args, .. } => {
                args.iter().copied().collect()
            }
            InstKind::CallValue { callee, args } => std::iter::once(Operand::Value(*callee))
                .chain(args.iter().copied())
                .collect(),
            InstKind::Phi { entries } => entries.iter().map(|(_, op)| *op).collect(),
        }
    }

    /// Joins the array classes that may be the same array.
    fn classes(&mut self) {
        for k in 0..self.insts.len() {
            let inst = self.insts[k];
            let Some(r) = self.func.insts[inst].result else {
                continue;
            };
            if !self.arrays[r.index()] {
                continue;
            }
            if let Flow::Pure | Flow::Opaque = self.flow(inst) {
                for op in self.operands(inst) {
                    if let Operand::Value(v) = op
                        && self.arrays[v.index()]
                    {
                        self.union(r, v);
                    }
                }
            }
        }
    }

    /// Whether operand `op` carries a varied derivative.
    fn op_varied(&mut self, op: &Operand) -> bool {
        let Operand::Value(v) = op else { return false };
        if self.arrays[v.index()] {
            let c = self.find(v.index() as u32);
            self.varied[c as usize]
        } else {
            self.varied[v.index()]
        }
    }

    /// Marks `v` (or its class) varied; whether that changed anything.
    /// Values of a tangent type that is not tracked (a tuple holding a
    /// function value) get the mark too: they are active whatever it says,
    /// but what is read out of them (`getfield`) depends on it.
    fn set_varied(&mut self, v: Value) -> bool {
        let i = if self.arrays[v.index()] {
            self.find(v.index() as u32) as usize
        } else if self.carries[v.index()] {
            v.index()
        } else {
            return false;
        };
        !std::mem::replace(&mut self.varied[i], true)
    }

    /// The forward fixpoint: which values depend on the active parameters.
    fn vary(&mut self) {
        let func = self.func;
        for (i, &p) in func.params.iter().enumerate() {
            if self.params.get(i).copied().unwrap_or(true) {
                self.set_varied(p);
            }
        }
        let mut changed = true;
        while changed {
            changed = false;
            for k in 0..self.insts.len() {
                let inst = self.insts[k];
                let result = func.insts[inst].result;
                let ops = self.operands(inst);
                match self.flow(inst) {
                    Flow::Pure | Flow::Copy => {
                        let any = ops.iter().any(|op| self.op_varied(op));
                        if any && let Some(r) = result {
                            changed |= self.set_varied(r);
                        }
                    }
                    Flow::Read => {
                        let any = ops.first().is_some_and(|a| self.op_varied(a));
                        if any && let Some(r) = result {
                            changed |= self.set_varied(r);
                        }
                    }
                    Flow::Write => {
                        if let [Operand::Value(a), _, x] = ops.as_slice()
                            && self.op_varied(x)
                        {
                            changed |= self.set_varied(*a);
                        }
                    }
                    Flow::Fresh | Flow::Push => {}
                    Flow::Pop => {
                        if let Some(r) = result {
                            changed |= self.set_varied(r);
                        }
                    }
                    Flow::Bulk(written) => {
                        if ops.iter().any(|op| self.op_varied(op)) {
                            if let Some(r) = result {
                                changed |= self.set_varied(r);
                            }
                            if let Some(Operand::Value(a)) = written.and_then(|k| ops.get(k)) {
                                changed |= self.set_varied(*a);
                            }
                        }
                    }
                    Flow::Opaque => {
                        if ops.iter().any(|op| self.op_varied(op)) {
                            if let Some(r) = result {
                                changed |= self.set_varied(r);
                            }
                            for op in &ops {
                                if let Operand::Value(v) = op
                                    && self.arrays[v.index()]
                                {
                                    changed |= self.set_varied(*v);
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// Whether value `v` (or its class) is useful.
    fn is_useful(&mut self, v: Value) -> bool {
        if self.arrays[v.index()] {
            let c = self.find(v.index() as u32);
            self.useful[c as usize]
        } else {
            self.useful[v.index()]
        }
    }

    /// Marks operand `op` (or its class) useful; whether that changed
    /// anything. As for [`Analysis::set_varied`], values of any tangent type
    /// get the mark, so that what is put into a tuple that also holds a
    /// function value is useful when the tuple is.
    fn set_useful(&mut self, op: &Operand) -> bool {
        let Operand::Value(v) = op else { return false };
        let i = if self.arrays[v.index()] {
            self.find(v.index() as u32) as usize
        } else if self.carries[v.index()] {
            v.index()
        } else {
            return false;
        };
        !std::mem::replace(&mut self.useful[i], true)
    }

    /// The backward fixpoint: which values the outputs depend on.
    fn use_(&mut self) {
        let func = self.func;
        for &p in &func.params {
            if self.arrays[p.index()] {
                self.set_useful(&Operand::Value(p));
            }
        }
        for &b in &func.layout {
            if let Some(irad_ir::Terminator::Return(op)) = &func.blocks[b].term {
                self.set_useful(op);
            }
        }
        let mut changed = true;
        while changed {
            changed = false;
            for k in (0..self.insts.len()).rev() {
                let inst = self.insts[k];
                let out = func.insts[inst].result.is_some_and(|r| self.is_useful(r));
                let ops = self.operands(inst);
                match self.flow(inst) {
                    Flow::Pure | Flow::Copy | Flow::Read => {
                        if out {
                            for op in &ops {
                                changed |= self.set_useful(op);
                            }
                        }
                    }
                    Flow::Write => {
                        if let [Operand::Value(a), _, x] = ops.as_slice()
                            && self.is_useful(*a)
                        {
                            changed |= self.set_useful(x);
                        }
                    }
                    Flow::Fresh => {}
                    Flow::Pop => {
                        // A popped array is memory another function (the
                        // one that pushed it) sees: what is written into it
                        // is an output.
                        if let Some(r) = func.insts[inst].result
                            && self.arrays[r.index()]
                        {
                            changed |= self.set_useful(&Operand::Value(r));
                        }
                    }
                    Flow::Push => {
                        for op in &ops {
                            changed |= self.set_useful(op);
                        }
                    }
                    Flow::Bulk(written) => {
                        let into = match written.and_then(|k| ops.get(k)) {
                            Some(Operand::Value(a)) => self.is_useful(*a),
                            _ => false,
                        };
                        if out || into {
                            for op in &ops {
                                changed |= self.set_useful(op);
                            }
                        }
                    }
                    Flow::Opaque => {
                        let any_array = ops.iter().any(|op| match op {
                            Operand::Value(v) => self.arrays[v.index()] && self.is_useful(*v),
                            Operand::Const(_) => false,
                        });
                        if out || any_array {
                            for op in &ops {
                                changed |= self.set_useful(op);
                            }
                        }
                    }
                }
            }
        }
    }
}
