// The lead-up rings' allocation, the loop's slow path (bucket boundaries, long items) and the readers' copy.
#include "sw_leadup.h"

#include <stdlib.h>
#include <string.h>

static uint32_t round_up_power_of_two(uint32_t n) {
    uint32_t p = 1;
    while (p < n && p < (1u << 30)) p <<= 1;
    return p;
}

static uint32_t bucket_count_for(uint64_t window_ns, uint64_t bucket_ns) {
    if (bucket_ns == 0) return 1;
    uint64_t n = window_ns / bucket_ns;
    if (n < 1) n = 1;
    if (n > 100000) n = 100000;
    return (uint32_t)n;
}

uint64_t sw_leadup_footprint(uint64_t window_ns, uint64_t bucket_ns, uint32_t item_capacity) {
    uint64_t buckets = bucket_count_for(window_ns, bucket_ns);
    return sizeof(sw_leadup) + buckets * (sizeof(sw_leadup_bucket) + sizeof(sw_leadup_sched)) +
           (uint64_t)round_up_power_of_two(item_capacity ? item_capacity : 1) * sizeof(sw_leadup_item);
}

sw_leadup *sw_leadup_create(uint64_t window_ns, uint64_t bucket_ns, uint64_t item_min_ns, uint32_t item_capacity) {
    if (bucket_ns == 0) return NULL;
    uint32_t buckets = bucket_count_for(window_ns, bucket_ns);
    uint32_t capacity = round_up_power_of_two(item_capacity ? item_capacity : 1);
    size_t size = sw_leadup_footprint(window_ns, bucket_ns, capacity);
    // One allocation, cache-line aligned; calloc's zeroes are the "never used" state of every entry.
    size_t rounded = (size + 63) & ~(size_t)63;
    char *memory = aligned_alloc(64, rounded);
    if (memory == NULL) return NULL;
    memset(memory, 0, rounded);
    sw_leadup *r = (sw_leadup *)memory;
    r->bucket_ns = bucket_ns;
    r->item_min_ns = item_min_ns;
    r->bucket_count = buckets;
    r->item_capacity = capacity;
    r->enabled = 1;
    r->buckets = (sw_leadup_bucket *)(memory + sizeof(sw_leadup));
    r->sched = (sw_leadup_sched *)((char *)r->buckets + (size_t)buckets * sizeof(sw_leadup_bucket));
    r->items = (sw_leadup_item *)((char *)r->sched + (size_t)buckets * sizeof(sw_leadup_sched));
    return r;
}

void sw_leadup_destroy(sw_leadup *r) { free(r); }

/// The bucket numbered `number`, reset when it still holds an older one. The number is cleared first and set
/// last (release), so a reader that copies it meanwhile sees a mismatch and zeroes its copy.
static sw_leadup_bucket *bucket_for(sw_leadup *r, uint64_t number) {
    sw_leadup_bucket *b = &r->buckets[(number - 1) % r->bucket_count];
    if (__atomic_load_n(&b->number, __ATOMIC_RELAXED) != number) {
        __atomic_store_n(&b->number, 0, __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_RELEASE);
        __atomic_store_n(&b->busy_ns, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&b->longest_ns, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&b->max_delay_ns, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&b->items, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&b->longest_label, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&b->number, number, __ATOMIC_RELEASE);
    }
    return b;
}

void sw_leadup_end_slow(sw_leadup *r, uint64_t begin_ns, uint64_t end_ns, uint32_t label, uint64_t delay_ns) {
    uint64_t width = r->bucket_ns;
    uint64_t last = end_ns / width + 1;
    if (last != r->open_number) {
        r->open_number = last;
        r->open_end_ns = last * width;
    }
    uint64_t duration = end_ns - begin_ns;
    sw_leadup_bucket *b = bucket_for(r, last);
    __atomic_store_n(&b->items, b->items + 1, __ATOMIC_RELAXED);
    if (duration > b->longest_ns) {
        __atomic_store_n(&b->longest_ns, duration, __ATOMIC_RELAXED);
        __atomic_store_n(&b->longest_label, label, __ATOMIC_RELAXED);
    }
    if (delay_ns > b->max_delay_ns) __atomic_store_n(&b->max_delay_ns, delay_ns, __ATOMIC_RELAXED);
    // Busy time goes to every bucket the item covered (within the window), so a 400 ms item reads as four busy
    // buckets, not one bucket 400 % busy.
    uint64_t first = begin_ns / width + 1;
    if (last - first >= r->bucket_count) first = last - r->bucket_count + 1;
    for (uint64_t n = first; n <= last; n++) {
        uint64_t from = (n - 1) * width, to = n * width;
        if (from < begin_ns) from = begin_ns;
        if (to > end_ns) to = end_ns;
        if (to <= from) continue;
        sw_leadup_bucket *covered = n == last ? b : bucket_for(r, n);
        __atomic_store_n(&covered->busy_ns, covered->busy_ns + (to - from), __ATOMIC_RELAXED);
    }
    __atomic_store_n(&r->items_total, r->items_total + 1, __ATOMIC_RELAXED);
    if (duration >= r->item_min_ns) sw_leadup_append(r, begin_ns, end_ns, label, delay_ns);
}

void sw_leadup_add_sched(sw_leadup *r, uint64_t at_ns, uint64_t run_queue_wait_ns, uint64_t cpu_ns,
                         uint32_t voluntary, uint32_t involuntary) {
    uint64_t number = at_ns / r->bucket_ns + 1;
    sw_leadup_sched *s = &r->sched[(number - 1) % r->bucket_count];
    if (__atomic_load_n(&s->number, __ATOMIC_RELAXED) != number) {
        __atomic_store_n(&s->number, 0, __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_RELEASE);
        __atomic_store_n(&s->run_queue_wait_ns, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&s->cpu_ns, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&s->voluntary, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&s->involuntary, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&s->number, number, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&s->run_queue_wait_ns, s->run_queue_wait_ns + run_queue_wait_ns, __ATOMIC_RELAXED);
    __atomic_store_n(&s->cpu_ns, s->cpu_ns + cpu_ns, __ATOMIC_RELAXED);
    __atomic_store_n(&s->voluntary, s->voluntary + voluntary, __ATOMIC_RELAXED);
    __atomic_store_n(&s->involuntary, s->involuntary + involuntary, __ATOMIC_RELAXED);
}

sw_leadup_copy_result sw_leadup_copy(const sw_leadup *r, uint64_t now_ns, sw_leadup_bucket *buckets,
                                     sw_leadup_sched *sched, sw_leadup_item *items) {
    sw_leadup_copy_result result = {0, 0, 0, 0};
    uint64_t last = now_ns / r->bucket_ns + 1;
    uint64_t first = last > r->bucket_count ? last - r->bucket_count + 1 : 1;
    result.first_bucket = first;
    for (uint64_t n = first; n <= last; n++) {
        uint32_t i = (uint32_t)(n - first);
        const sw_leadup_bucket *b = &r->buckets[(n - 1) % r->bucket_count];
        sw_leadup_bucket copy;
        uint64_t before = __atomic_load_n(&b->number, __ATOMIC_ACQUIRE);
        copy.busy_ns = __atomic_load_n(&b->busy_ns, __ATOMIC_RELAXED);
        copy.longest_ns = __atomic_load_n(&b->longest_ns, __ATOMIC_RELAXED);
        copy.max_delay_ns = __atomic_load_n(&b->max_delay_ns, __ATOMIC_RELAXED);
        copy.items = __atomic_load_n(&b->items, __ATOMIC_RELAXED);
        copy.longest_label = __atomic_load_n(&b->longest_label, __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        uint64_t after = __atomic_load_n(&b->number, __ATOMIC_RELAXED);
        if (before != n || after != n) memset(&copy, 0, sizeof copy);
        copy.number = n;
        copy.reserved[0] = copy.reserved[1] = 0;
        buckets[i] = copy;

        const sw_leadup_sched *s = &r->sched[(n - 1) % r->bucket_count];
        sw_leadup_sched scopy;
        before = __atomic_load_n(&s->number, __ATOMIC_ACQUIRE);
        scopy.run_queue_wait_ns = __atomic_load_n(&s->run_queue_wait_ns, __ATOMIC_RELAXED);
        scopy.cpu_ns = __atomic_load_n(&s->cpu_ns, __ATOMIC_RELAXED);
        scopy.voluntary = __atomic_load_n(&s->voluntary, __ATOMIC_RELAXED);
        scopy.involuntary = __atomic_load_n(&s->involuntary, __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        after = __atomic_load_n(&s->number, __ATOMIC_RELAXED);
        if (before != n || after != n) memset(&scopy, 0, sizeof scopy);
        scopy.number = n;
        sched[i] = scopy;
        result.buckets = i + 1;
    }
    uint64_t window_start = (first - 1) * r->bucket_ns;
    uint64_t written = __atomic_load_n(&r->items_written, __ATOMIC_ACQUIRE);
    uint64_t oldest = written > r->item_capacity ? written - r->item_capacity : 0;
    uint32_t count = 0;
    for (uint64_t k = oldest; k < written; k++) {
        const sw_leadup_item *slot = &r->items[k & (r->item_capacity - 1)];
        sw_leadup_item copy;
        copy.begin_ns = __atomic_load_n(&slot->begin_ns, __ATOMIC_RELAXED);
        copy.end_ns = __atomic_load_n(&slot->end_ns, __ATOMIC_RELAXED);
        copy.delay_ns = __atomic_load_n(&slot->delay_ns, __ATOMIC_RELAXED);
        copy.label = __atomic_load_n(&slot->label, __ATOMIC_RELAXED);
        copy.reserved = 0;
        items[count++] = copy;
    }
    // Entries the writer may have overwritten while they were copied: those older than capacity behind the count
    // read now.
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    uint64_t again = __atomic_load_n(&r->items_written, __ATOMIC_ACQUIRE);
    uint64_t safe = again > r->item_capacity ? again - r->item_capacity : 0;
    uint32_t skip = safe > oldest ? (uint32_t)(safe - oldest) : 0;
    if (skip > count) skip = count;
    uint32_t kept = 0;
    for (uint32_t i = skip; i < count; i++) {
        if (items[i].end_ns < window_start || items[i].end_ns > now_ns + r->bucket_ns) continue;
        items[kept++] = items[i];
    }
    // The ring wrapped and its oldest surviving item ended inside the window: older long items of the window
    // were overwritten, so the list is complete only from that item on.
    if ((oldest > 0 || skip > 0) && kept > 0 && items[0].end_ns > window_start) result.items_from_ns = items[0].begin_ns;
    result.items = kept;
    return result;
}
