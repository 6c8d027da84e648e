// The register layout every StallWatch capture fills and the unwinder reads: libunwind's x86_64 numbering
// (UNW_X86_64_RAX … UNW_X86_64_RIP, the DWARF order), SW_REGISTER_COUNT values. The one place the order and the
// count are written, for C (the signal handler, the ptrace captures, the unwinder) and Swift alike.
#ifndef SW_REGISTERS_H
#define SW_REGISTERS_H
#include <stdint.h>

#if defined(__linux__) && defined(__x86_64__)
#include <sys/user.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/// Indices into a capture's `registers` array.
enum {
    SW_REG_RAX,
    SW_REG_RDX,
    SW_REG_RCX,
    SW_REG_RBX,
    SW_REG_RSI,
    SW_REG_RDI,
    SW_REG_RBP,
    SW_REG_RSP,
    SW_REG_R8,
    SW_REG_R9,
    SW_REG_R10,
    SW_REG_R11,
    SW_REG_R12,
    SW_REG_R13,
    SW_REG_R14,
    SW_REG_R15,
    SW_REG_RIP,
    SW_REGISTER_COUNT
};

#if defined(__linux__) && defined(__x86_64__)
/// Copies ptrace's PTRACE_GETREGS layout into `r` (SW_REGISTER_COUNT values). Async-signal-safe (plain stores),
/// usable from the capture helper, which makes raw system calls only.
static inline void sw_registers_from_user_regs(const struct user_regs_struct *g, uint64_t *r) {
    r[SW_REG_RAX] = g->rax, r[SW_REG_RDX] = g->rdx, r[SW_REG_RCX] = g->rcx, r[SW_REG_RBX] = g->rbx;
    r[SW_REG_RSI] = g->rsi, r[SW_REG_RDI] = g->rdi, r[SW_REG_RBP] = g->rbp, r[SW_REG_RSP] = g->rsp;
    r[SW_REG_R8] = g->r8, r[SW_REG_R9] = g->r9, r[SW_REG_R10] = g->r10, r[SW_REG_R11] = g->r11;
    r[SW_REG_R12] = g->r12, r[SW_REG_R13] = g->r13, r[SW_REG_R14] = g->r14, r[SW_REG_R15] = g->r15;
    r[SW_REG_RIP] = g->rip;
}
#endif

#ifdef __cplusplus
}
#endif
#endif
