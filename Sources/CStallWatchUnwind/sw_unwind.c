// libunwind remote unwinding of a copied stack (see sw_unwind.h).
#ifdef __linux__
#ifndef __x86_64__
#error "sw_unwind.c maps sw_unwind_input.registers to libunwind x86_64 register numbers (UNW_X86_64_RAX … UNW_X86_64_RIP, in access_reg); a port needs that mapping for its architecture"
#endif
#include "sw_unwind.h"

#include <errno.h>
#include <libunwind.h>
#include <libunwind-ptrace.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

// sw_registers.h writes the layout down once; it must be libunwind's, since access_reg indexes it by regnum.
_Static_assert(SW_REG_RAX == UNW_X86_64_RAX && SW_REG_RDX == UNW_X86_64_RDX && SW_REG_RCX == UNW_X86_64_RCX &&
                   SW_REG_RBX == UNW_X86_64_RBX && SW_REG_RSI == UNW_X86_64_RSI && SW_REG_RDI == UNW_X86_64_RDI &&
                   SW_REG_RBP == UNW_X86_64_RBP && SW_REG_RSP == UNW_X86_64_RSP && SW_REG_R8 == UNW_X86_64_R8 &&
                   SW_REG_R15 == UNW_X86_64_R15 && SW_REG_RIP == UNW_X86_64_RIP && SW_REGISTER_COUNT == UNW_X86_64_RIP + 1,
               "sw_registers.h must follow libunwind's x86_64 register numbering");

#define PAGE 4096u
#define CACHE_PAGES 16u

// Live-memory pages read during one unwind (text, .eh_frame_hdr's binary-search table, FDEs, CIEs).
// Reset per unwind: the target may unmap a library between samples.
typedef struct page_cache {
    uint64_t tag[CACHE_PAGES];  // page address + 1; 0 = empty
    uint8_t data[CACHE_PAGES][PAGE];
} page_cache;

struct sw_unwinder {
    pid_t pid;
    unw_addr_space_t space;
    void *upt;
    const sw_unwind_input *input;  // the capture being unwound, set for the duration of sw_unwind
    page_cache cache;
};

// libunwind-ptrace calls our accessors with ITS argument (the UPT handle) from inside
// _UPT_find_proc_info, so the accessors find the current unwind through this instead of `arg`.
static __thread sw_unwinder *current;

static int read_page(sw_unwinder *u, uint64_t page, const uint8_t **out) {
    uint32_t index = (uint32_t)(page / PAGE) % CACHE_PAGES;
    if (u->cache.tag[index] != page + 1) {
        struct iovec local = {u->cache.data[index], PAGE};
        struct iovec remote = {(void *)(uintptr_t)page, PAGE};
        u->cache.tag[index] = 0;
        if (process_vm_readv(u->pid, &local, 1, &remote, 1, 0) != (ssize_t)PAGE) return -UNW_EINVAL;
        u->cache.tag[index] = page + 1;
    }
    *out = u->cache.data[index];
    return 0;
}

static int read_live(sw_unwinder *u, uint64_t address, void *out, size_t length) {
    uint8_t *dst = out;
    while (length) {
        uint64_t page = address & ~(uint64_t)(PAGE - 1);
        size_t offset = (size_t)(address - page), n = PAGE - offset;
        if (n > length) n = length;
        const uint8_t *data;
        int r = read_page(u, page, &data);
        if (r) return r;
        memcpy(dst, data + offset, n);
        dst += n;
        address += n;
        length -= n;
    }
    return 0;
}

static int access_mem(unw_addr_space_t as, unw_word_t address, unw_word_t *value, int write, void *arg) {
    sw_unwinder *u = current;
    if (!u || write) return -UNW_EINVAL;
    const sw_unwind_input *in = u->input;
    // No sums of `address`: a garbage CFA near 2^64 would wrap them and pass the bounds checks.
    if (address >= in->stack_pointer && in->stack_size >= sizeof *value &&
        address - in->stack_pointer <= in->stack_size - sizeof *value) {
        memcpy(value, in->stack + (address - in->stack_pointer), sizeof *value);
        return 0;
    }
    // The live stack below SP or above the copy no longer holds what the thread had: refuse.
    uint64_t low = in->stack_low > sizeof *value ? in->stack_low - sizeof *value : 0;
    if (address > low && address < in->stack_high) return -UNW_EINVAL;
    return read_live(u, address, value, sizeof *value);
}

static int access_reg(unw_addr_space_t as, unw_regnum_t reg, unw_word_t *value, int write, void *arg) {
    sw_unwinder *u = current;
    if (!u || write || reg < 0 || reg > UNW_X86_64_RIP) return -UNW_EBADREG;
    *value = u->input->registers[reg];
    return 0;
}

static int access_fpreg(unw_addr_space_t as, unw_regnum_t reg, unw_fpreg_t *value, int write, void *arg) {
    return -UNW_EBADREG;  // not captured
}

static int resume(unw_addr_space_t as, unw_cursor_t *cursor, void *arg) { return -UNW_EINVAL; }

static int find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *info, int need, void *arg) {
    return current ? _UPT_find_proc_info(as, ip, info, need, current->upt) : -UNW_ENOINFO;
}

static void put_unwind_info(unw_addr_space_t as, unw_proc_info_t *info, void *arg) {
    if (current) _UPT_put_unwind_info(as, info, current->upt);
}

static int get_dyn_info_list_addr(unw_addr_space_t as, unw_word_t *address, void *arg) {
    return current ? _UPT_get_dyn_info_list_addr(as, address, current->upt) : -UNW_ENOINFO;
}

static int get_proc_name(unw_addr_space_t as, unw_word_t ip, char *buffer, size_t length, unw_word_t *offset,
                         void *arg) {
    return -UNW_ENOINFO;  // symbolication is a separate stage
}

static unw_accessors_t accessors = {
    .find_proc_info = find_proc_info,
    .put_unwind_info = put_unwind_info,
    .get_dyn_info_list_addr = get_dyn_info_list_addr,
    .access_mem = access_mem,
    .access_reg = access_reg,
    .access_fpreg = access_fpreg,
    .resume = resume,
    .get_proc_name = get_proc_name,
};

sw_unwinder *sw_unwinder_create(pid_t pid) {
    sw_unwinder *u = calloc(1, sizeof *u);
    if (!u) return NULL;
    u->pid = pid;
    u->space = unw_create_addr_space(&accessors, 0);
    u->upt = u->space ? _UPT_create(pid) : NULL;
    if (!u->upt) {
        if (u->space) unw_destroy_addr_space(u->space);
        free(u);
        errno = ENOMEM;
        return NULL;
    }
    unw_set_caching_policy(u->space, UNW_CACHE_GLOBAL);
    return u;
}

void sw_unwinder_destroy(sw_unwinder *u) {
    if (!u) return;
    _UPT_destroy(u->upt);
    unw_destroy_addr_space(u->space);
    free(u);
}

void sw_unwinder_flush(sw_unwinder *u) {
    unw_flush_cache(u->space, 0, 0);
    // The UPT handle keeps the last ELF image it mapped; a fresh one forgets it.
    void *fresh = _UPT_create(u->pid);
    if (fresh) {
        _UPT_destroy(u->upt);
        u->upt = fresh;
    }
}

static size_t finish(sw_unwind_result *r, size_t count, sw_unwind_stop stop, int error) {
    static const char *const reasons[] = {
        [SW_UNWIND_COMPLETE] = "reached the outermost frame",
        [SW_UNWIND_MAX_FRAMES] = "stopped at the frame limit",
        [SW_UNWIND_NO_PROGRESS] = "a step made no progress (same IP and SP)",
    };
    r->count = count;
    r->stop = stop;
    r->unw_error = error;
    r->reason = error ? unw_strerror(error) : reasons[stop];
    current = NULL;
    return count;
}

size_t sw_unwind(sw_unwinder *u, const sw_unwind_input *input, uint64_t *addresses, size_t max_frames,
                 sw_unwind_result *result) {
    return sw_unwind_frames(u, input, addresses, NULL, max_frames, result);
}

size_t sw_unwind_frames(sw_unwinder *u, const sw_unwind_input *input, uint64_t *addresses, sw_unwind_frame *frames,
                        size_t max_frames, sw_unwind_result *result) {
    memset(u->cache.tag, 0, sizeof u->cache.tag);
    u->input = input;
    current = u;
    unw_cursor_t cursor;
    unw_word_t ip = 0, sp = 0, fp = 0, last_ip, last_sp;
    int r = unw_init_remote(&cursor, u->space, u);
    if (r == 0) r = unw_get_reg(&cursor, UNW_REG_IP, &ip);
    if (r == 0) r = unw_get_reg(&cursor, UNW_REG_SP, &sp);
    if (r < 0) return finish(result, 0, SW_UNWIND_INIT_FAILED, r);
    size_t count = 0;
    for (;;) {
        if (ip == 0) return finish(result, count, SW_UNWIND_COMPLETE, 0);
        if (count == max_frames) return finish(result, count, SW_UNWIND_MAX_FRAMES, 0);
        if (frames) {
            // RBP as this frame sees it (restored from its callees' saves); 0 when libunwind cannot tell.
            if (unw_get_reg(&cursor, UNW_X86_64_RBP, &fp) < 0) fp = 0;
            frames[count] = (sw_unwind_frame){.stack_pointer = sp, .frame_pointer = fp};
        }
        addresses[count++] = ip;
        last_ip = ip;
        last_sp = sp;
        r = unw_step(&cursor);
        if (r == 0) return finish(result, count, SW_UNWIND_COMPLETE, 0);
        if (r > 0) r = unw_get_reg(&cursor, UNW_REG_IP, &ip);
        if (r >= 0) r = unw_get_reg(&cursor, UNW_REG_SP, &sp);
        if (r < 0) return finish(result, count, SW_UNWIND_STEP_FAILED, r);
        if (ip == last_ip && sp == last_sp) return finish(result, count, SW_UNWIND_NO_PROGRESS, 0);
    }
}
#endif
