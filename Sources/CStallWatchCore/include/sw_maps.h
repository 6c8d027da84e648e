// A parser of /proc/<pid>/maps text into fixed records, for the watching thread: a process of a thousand threads
// has thousands of lines, re-read at each stall, and a byte loop in C costs microseconds where Swift's generic
// collection code in an unoptimised build cost tens of milliseconds.
#ifndef SW_MAPS_H
#define SW_MAPS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// One well-formed line of proc(5) `maps`: `start-end perms offset dev inode path`.
typedef struct sw_map_line {
    uint64_t start;
    uint64_t end;
    /// The file offset of `start`.
    uint64_t offset;
    /// The backing file's inode (0 for anonymous memory).
    uint64_t inode;
    /// The path's bytes within the parsed text (leading spaces skipped, a trailing " (deleted)" left out);
    /// `path_length` 0 for anonymous memory.
    uint32_t path_offset;
    uint32_t path_length;
    /// Bit 0 readable, bit 1 writable, bit 2 executable.
    uint8_t perms;
} sw_map_line;

enum { SW_MAP_READ = 1, SW_MAP_WRITE = 2, SW_MAP_EXEC = 4 };

/// Parses `length` bytes of maps text. Writes the first `capacity` well-formed lines to `out` (which may be NULL
/// when `capacity` is 0) in the text's order and returns how many well-formed lines there are (more than
/// `capacity`: call again with room for them). A malformed line (a field missing, an address of more than 16
/// hex digits, fewer than 3 permission letters) is skipped. Never reads outside `text[0..<length]`; allocates
/// nothing; texts over 4 GiB are cut at 4 GiB. Async-signal-safe.
size_t sw_parse_maps(const uint8_t *text, size_t length, sw_map_line *out, size_t capacity);

#ifdef __cplusplus
}
#endif
#endif
