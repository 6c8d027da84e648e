// The /proc/<pid>/maps parser; see sw_maps.h.
#include "sw_maps.h"

static int hex_digit(uint8_t c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/// Parses a hex number of 1–16 digits in [from, to). Returns 0 on success.
static int parse_hex(const uint8_t *text, size_t from, size_t to, uint64_t *value) {
    if (to <= from || to - from > 16) return -1;
    uint64_t result = 0;
    for (size_t i = from; i < to; i++) {
        int digit = hex_digit(text[i]);
        if (digit < 0) return -1;
        result = result << 4 | (uint64_t)digit;
    }
    *value = result;
    return 0;
}

/// The next space-separated field of the line [*cursor, end): its bounds. Returns 0 when there is one.
static int next_field(const uint8_t *text, size_t *cursor, size_t end, size_t *from, size_t *to) {
    size_t i = *cursor;
    while (i < end && text[i] == ' ') i++;
    if (i == end) return -1;
    *from = i;
    while (i < end && text[i] != ' ') i++;
    *to = i;
    *cursor = i;
    return 0;
}

static int parse_line(const uint8_t *text, size_t begin, size_t end, sw_map_line *line) {
    size_t cursor = begin, from[5], to[5];
    for (int f = 0; f < 5; f++)
        if (next_field(text, &cursor, end, &from[f], &to[f]) != 0) return -1;
    size_t dash = from[0];
    while (dash < to[0] && text[dash] != '-') dash++;
    if (dash == to[0]) return -1;
    if (parse_hex(text, from[0], dash, &line->start) != 0) return -1;
    if (parse_hex(text, dash + 1, to[0], &line->end) != 0) return -1;
    if (parse_hex(text, from[2], to[2], &line->offset) != 0) return -1;
    if (to[1] - from[1] < 3) return -1;
    line->perms = (uint8_t)((text[from[1]] == 'r' ? SW_MAP_READ : 0) | (text[from[1] + 1] == 'w' ? SW_MAP_WRITE : 0) |
                            (text[from[1] + 2] == 'x' ? SW_MAP_EXEC : 0));
    uint64_t inode = 0;
    for (size_t i = from[4]; i < to[4] && text[i] >= '0' && text[i] <= '9'; i++) inode = inode * 10 + (text[i] - '0');
    line->inode = inode;
    while (cursor < end && text[cursor] == ' ') cursor++;
    size_t path_end = end;
    static const char deleted[] = " (deleted)";
    size_t deleted_length = sizeof deleted - 1;
    if (path_end - cursor >= deleted_length) {
        size_t k = 0;
        while (k < deleted_length && text[path_end - deleted_length + k] == (uint8_t)deleted[k]) k++;
        if (k == deleted_length) path_end -= deleted_length;
    }
    line->path_offset = (uint32_t)cursor;
    line->path_length = (uint32_t)(path_end - cursor);
    return 0;
}

size_t sw_parse_maps(const uint8_t *text, size_t length, sw_map_line *out, size_t capacity) {
    if (length > UINT32_MAX) length = UINT32_MAX;
    size_t count = 0, begin = 0;
    for (size_t i = 0; i <= length; i++) {
        if (i < length && text[i] != '\n') continue;
        sw_map_line line;
        if (i > begin && parse_line(text, begin, i, &line) == 0) {
            if (count < capacity) out[count] = line;
            count++;
        }
        begin = i + 1;
    }
    return count;
}
