// StackSwitchRule: the trampolines through which a runtime calls foreign code on another stack.

/// A function through which a language runtime calls foreign (C) code on a stack of its own, and where it leaves
/// the stack it came from, so that an unwind that reaches the trampoline can continue on the caller's stack.
///
/// A return-address unwind of the foreign code (DWARF CFI) reaches the trampoline's frame and then has nothing to go
/// on: the trampoline has no unwind information and its caller's frames are on another stack. Each rule says how
/// that stack is found from the trampoline's frame, and is documented with where the layout comes from and for which
/// runtime versions it was checked. Rules are matched by symbol name in images that carry the runtime's marker
/// section; an image without a symbol table (stripped) matches no rule, and the unwind ends at the foreign code's
/// outermost frame, as it would without rules.
struct StackSwitchRule: Sendable {
    /// How the caller's stack is found from the trampoline's frame.
    enum Layout: Sendable {
        /// Go's `runtime.asmcgocall` on amd64: after switching to the system (g0) stack it stores, in its own frame
        /// on that stack, the goroutine (`g*`) at `goroutineOffset(SP)` and the goroutine stack's depth (`g.stack.hi`
        /// minus the goroutine's SP at the switch) at `depthOffset(SP)`, then calls the C function. `g.stack` is the
        /// first field of `g`: `lo` at `stackLowOffset`, `hi` at `stackHighOffset`. The goroutine's SP at the switch
        /// points at the return address into `runtime.cgocall`, and Go amd64 keeps frame pointers, so RBP, which the
        /// C code preserves and the CFI unwind restores, is `runtime.cgocall`'s frame pointer: a frame-pointer walk
        /// from it reaches the Go callers up to `runtime.main` or `runtime.goexit`.
        case goSystemStackCall(
            goroutineOffset: UInt64, depthOffset: UInt64, stackLowOffset: UInt64, stackHighOffset: UInt64)
    }

    /// What the stack past the switch is called in notes ("goroutine stack").
    let stackName: String
    /// A section that only the runtime's images have, checked before their symbol table is read.
    let imageMarker: String
    /// The trampoline's symbol names; a return address inside any of them is a switch.
    let symbols: [String]
    /// The bytes of the trampoline's call of the foreign function, just before the return address: a return address
    /// that does not follow them is not the call site the layout describes.
    let callInstruction: [UInt8]
    let layout: Layout

    /// Go 1.19 on linux/amd64 (`src/runtime/asm_amd64.s`, `asmcgocall`: `MOVQ DI, 48(SP)` saves g, `MOVQ DI, 40(SP)`
    /// the depth, then `CALL AX`, bytes `ff d0`; `src/runtime/runtime2.go`: `g.stack` first, `stack{lo, hi}`), checked
    /// in a running cgo program. With the register ABI (Go 1.17 and later) the assembly function is
    /// `runtime.asmcgocall.abi0` and `runtime.asmcgocall` is a wrapper; earlier releases have only the latter. Its
    /// `nosave` path (a call made on the system stack already, no switch) stores 0 as the goroutine: no switch to
    /// follow, and the walk stops there.
    static let goCgoCall = StackSwitchRule(
        stackName: "goroutine stack", imageMarker: ".go.buildinfo",
        symbols: ["runtime.asmcgocall.abi0", "runtime.asmcgocall"], callInstruction: [0xff, 0xd0],
        layout: .goSystemStackCall(goroutineOffset: 48, depthOffset: 40, stackLowOffset: 0, stackHighOffset: 8))

    /// Every rule the unwinder applies.
    static let all: [StackSwitchRule] = [goCgoCall]
}
