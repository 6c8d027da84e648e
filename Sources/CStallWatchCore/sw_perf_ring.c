// A kernel-kept overwrite ring of one thread's user stacks (see sw_perf_ring.h).
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "sw_perf_ring.h"

#include <errno.h>
#include <linux/perf_event.h>
#if defined(__x86_64__)
#include <asm/perf_regs.h>
#endif
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int sw_perf_ring_open(sw_perf_ring *ring, pid_t tid, uint64_t period_ns, uint32_t data_pages, uint16_t max_frames,
                      uint32_t leaf_stack_bytes) {
    memset(ring, 0, sizeof *ring);
    ring->fd = -1;
    if (data_pages == 0 || (data_pages & (data_pages - 1)) != 0) return -EINVAL;
#if !defined(__x86_64__)
    leaf_stack_bytes = 0;
#endif
    leaf_stack_bytes &= ~7u;
    struct perf_event_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_TASK_CLOCK;
    attr.sample_period = period_ns;
    attr.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CALLCHAIN;
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    attr.exclude_callchain_kernel = 1;
    attr.use_clockid = 1;
    attr.clockid = CLOCK_MONOTONIC;
    attr.write_backward = 1;
    attr.sample_max_stack = max_frames;
#if defined(__x86_64__)
    if (leaf_stack_bytes > 0) {
        attr.sample_type |= PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
        attr.sample_regs_user = (1ull << PERF_REG_X86_BP) | (1ull << PERF_REG_X86_SP) | (1ull << PERF_REG_X86_IP);
        attr.sample_stack_user = leaf_stack_bytes;
    }
#endif
    long fd = syscall(SYS_perf_event_open, &attr, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0 && errno == EINVAL && leaf_stack_bytes > 0) {
        // A kernel that cannot dump user registers and stack: the call chain alone.
        attr.sample_type &= ~(uint64_t)(PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER);
        attr.sample_regs_user = 0;
        attr.sample_stack_user = 0;
        leaf_stack_bytes = 0;
        fd = syscall(SYS_perf_event_open, &attr, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
    }
    if (fd < 0) return -errno;
    long page = sysconf(_SC_PAGESIZE);
    size_t data_size = (size_t)data_pages * (size_t)page;
    size_t map_size = data_size + (size_t)page;
    // Read-only: the kernel never waits for a reader and overwrites the oldest records.
    void *base = mmap(NULL, map_size, PROT_READ, MAP_SHARED, (int)fd, 0);
    if (base == MAP_FAILED) {
        int error = errno;
        close((int)fd);
        return -error;
    }
    ring->fd = (int)fd;
    ring->base = base;
    ring->map_size = map_size;
    ring->data_size = data_size;
    ring->leaf_stack_bytes = leaf_stack_bytes;
    return 0;
}

/// Copies `length` bytes from ring offset `position` (wrapping at the end of the ring).
static void copy_out(const uint8_t *data, size_t size, uint64_t position, uint8_t *out, size_t length) {
    size_t at = (size_t)(position & (size - 1));
    size_t first = length < size - at ? length : size - at;
    memcpy(out, data + at, first);
    if (first < length) memcpy(out + first, data, length - first);
}

size_t sw_perf_ring_copy(sw_perf_ring *ring, uint8_t *out, size_t capacity) {
    if (ring->fd < 0 || ring->base == NULL) return 0;
    const struct perf_event_mmap_page *header = ring->base;
    size_t offset = header->data_offset != 0 ? (size_t)header->data_offset : (size_t)sysconf(_SC_PAGESIZE);
    const uint8_t *data = (const uint8_t *)ring->base + offset;
    size_t size = ring->data_size;
    ioctl(ring->fd, PERF_EVENT_IOC_PAUSE_OUTPUT, 1);
    // Written backward: data_head is where the newest record begins; older records follow it in address order
    // until the ring's size is used up or a never-written (zero) header is met.
    uint64_t head = __atomic_load_n(&header->data_head, __ATOMIC_ACQUIRE);
    size_t used = 0;
    while (used < size) {
        struct perf_event_header record;
        copy_out(data, size, head + used, (uint8_t *)&record, sizeof record);
        if (record.size < sizeof record || used + record.size > size || used + record.size > capacity) break;
        copy_out(data, size, head + used, out + used, record.size);
        used += record.size;
    }
    ioctl(ring->fd, PERF_EVENT_IOC_PAUSE_OUTPUT, 0);
    return used;
}

void sw_perf_ring_close(sw_perf_ring *ring) {
    if (ring->base != NULL) munmap(ring->base, ring->map_size);
    if (ring->fd >= 0) close(ring->fd);
    ring->base = NULL;
    ring->fd = -1;
}
