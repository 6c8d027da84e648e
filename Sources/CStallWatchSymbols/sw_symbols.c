// The libdwfl wrapper behind sw_symbols.h: one Dwfl session per process, modules from /proc/PID/maps.
#ifdef __linux__
#include "sw_symbols.h"

#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct sw_symbols {
    Dwfl *dwfl;
    pid_t pid;
    // The one module of a session opened on a file (sw_symbols_open_file); NULL for a process session.
    Dwfl_Module *file_module;
};

// Separate debug info is looked up only under /usr/lib/debug/.build-id/, where Debian's -dbgsym packages put it.
// dwfl_standard_find_debuginfo would also ask debuginfod servers when DEBUGINFOD_URLS is set: symbolication runs
// while a service is stalled and must never wait on the network. Files found only by .gnu_debuglink are not used.
static int sw_find_debuginfo(Dwfl_Module *module, void **userdata, const char *name, Dwarf_Addr base,
                             const char *file_name, const char *debuglink, GElf_Word crc, char **debuginfo_name) {
    const unsigned char *bits = NULL;
    GElf_Addr vaddr = 0;
    int length = dwfl_module_build_id(module, &bits, &vaddr);
    if (length < 2 || length > 64) return -1;
    char path[sizeof "/usr/lib/debug/.build-id//.debug" + 2 * 64 + 1];
    int used = snprintf(path, sizeof path, "/usr/lib/debug/.build-id/%02x/", bits[0]);
    for (int i = 1; i < length; i++) used += snprintf(path + used, sizeof path - (size_t)used, "%02x", bits[i]);
    snprintf(path + used, sizeof path - (size_t)used, ".debug");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        *debuginfo_name = strdup(path);
        if (*debuginfo_name == NULL) {
            close(fd);
            return -1;
        }
    }
    return fd;
}

static char *debuginfo_path = NULL;
static const Dwfl_Callbacks sw_proc_callbacks = {
    .find_elf = dwfl_linux_proc_find_elf,
    .find_debuginfo = sw_find_debuginfo,
    .debuginfo_path = &debuginfo_path,
};

// Compilation units by address, for modules without .debug_aranges. libdw 0.188 finds a CU for an address only
// through .debug_aranges (sourceware bug 22288), which clang and swiftc do not emit: without this index no Swift
// or clang-built frame would get a file:line. Built once per module from each CU's DW_AT_low_pc/high_pc/ranges
// and kept in the module's libdwfl userdata slot. Also for modules whose .debug_aranges covers only some CUs: a
// Go program linked with C objects (cgo) has aranges for its C CUs alone, and libdw then answers an address in Go
// code with a line of some C CU; such an answer is recognised (the CU does not contain the address) and the index
// is built for that module then.
typedef struct {
    Dwarf_Addr low, high;
    Dwarf_Off unit;
} sw_cu_range;

typedef struct {
    sw_cu_range *ranges;
    size_t count;
    int walked;  // every CU is in `ranges` (0: the module's aranges were trusted instead)
} sw_cu_index;

static void sw_cu_index_free(sw_cu_index *index) {
    if (index == NULL) return;
    free(index->ranges);
    free(index);
}

static int sw_compare_ranges(const void *a, const void *b) {
    const sw_cu_range *left = a, *right = b;
    return left->low < right->low ? -1 : left->low > right->low ? 1 : 0;
}

// The module's CU index; with `despite_aranges`, walked even when the module has .debug_aranges.
static sw_cu_index *sw_module_cu_index(Dwfl_Module *module, int despite_aranges) {
    void **userdata = NULL;
    dwfl_module_info(module, &userdata, NULL, NULL, NULL, NULL, NULL, NULL);
    if (userdata == NULL) return NULL;
    sw_cu_index *index = *userdata;
    if (index != NULL && (index->walked || !despite_aranges)) return index;
    if (index == NULL) {
        index = calloc(1, sizeof *index);
        if (index == NULL) return NULL;
        *userdata = index;
    }
    // Where .debug_aranges exists (gcc), libdw's own lookup already had its chance: an address it misses has no
    // line information, and walking thousands of CUs (libc's debug file) would cost tens of milliseconds.
    Dwarf_Addr bias = 0;
    Dwarf *dwarf = dwfl_module_getdwarf(module, &bias);
    Dwarf_Aranges *aranges = NULL;
    size_t arange_count = 0;
    if (dwarf == NULL) return index;
    if (!despite_aranges && dwarf_getaranges(dwarf, &aranges, &arange_count) == 0 && arange_count > 0) return index;
    index->walked = 1;
    size_t capacity = index->count;
    Dwarf_Die *unit = NULL;
    while ((unit = dwfl_module_nextcu(module, unit, &bias)) != NULL) {
        Dwarf_Addr base = 0, start = 0, end = 0;
        ptrdiff_t offset = 0;
        while ((offset = dwarf_ranges(unit, offset, &base, &start, &end)) > 0) {
            if (start >= end) continue;
            if (index->count == capacity) {
                size_t grown = capacity ? capacity * 2 : 64;
                sw_cu_range *ranges = realloc(index->ranges, grown * sizeof *ranges);
                if (ranges == NULL) break;
                index->ranges = ranges;
                capacity = grown;
            }
            index->ranges[index->count++] = (sw_cu_range){start, end, dwarf_dieoffset(unit)};
        }
    }
    qsort(index->ranges, index->count, sizeof *index->ranges, sw_compare_ranges);
    return index;
}

// The line record for `address` found through the CU index; NULL when no CU covers it.
static Dwarf_Line *sw_indexed_line(Dwfl_Module *module, Dwarf_Addr address, int despite_aranges) {
    sw_cu_index *index = sw_module_cu_index(module, despite_aranges);
    if (index == NULL || index->count == 0) return NULL;
    Dwarf_Addr bias = 0;
    Dwarf *dwarf = dwfl_module_getdwarf(module, &bias);
    if (dwarf == NULL) return NULL;
    Dwarf_Addr target = address - bias;
    size_t low = 0, high = index->count;
    while (low < high) {
        size_t mid = low + (high - low) / 2;
        if (index->ranges[mid].low <= target) low = mid + 1; else high = mid;
    }
    // Ranges of different CUs rarely overlap; look back a few entries in case they do.
    for (size_t i = low, checked = 0; i > 0 && checked < 8; i--, checked++) {
        const sw_cu_range *range = &index->ranges[i - 1];
        if (target < range->low || target >= range->high) continue;
        Dwarf_Die unit;
        if (dwarf_offdie(dwarf, range->unit, &unit) == NULL) return NULL;
        return dwarf_getsrc_die(&unit, target);
    }
    return NULL;
}

static int sw_free_removed(Dwfl_Module *module, void *userdata, const char *name, Dwarf_Addr start, void *arg) {
    sw_cu_index_free(userdata);
    return DWARF_CB_OK;
}

static int sw_free_module(Dwfl_Module *module, void **userdata, const char *name, Dwarf_Addr start, void *arg) {
    sw_cu_index_free(*userdata);
    *userdata = NULL;
    return DWARF_CB_OK;
}

static int sw_report(sw_symbols *symbols) {
    dwfl_report_begin(symbols->dwfl);
    int result = dwfl_linux_proc_report(symbols->dwfl, symbols->pid);
    // dwfl_report_end must run even after a failed report: the session is unusable until it has. Modules still
    // mapped are kept (with their caches and our index); the callback frees the index of those that are gone.
    if (dwfl_report_end(symbols->dwfl, sw_free_removed, NULL) != 0 && result == 0) result = -1;
    return result;
}

sw_symbols *sw_symbols_create(pid_t pid, int *error) {
    sw_symbols *symbols = calloc(1, sizeof *symbols);
    if (symbols == NULL) {
        if (error) *error = ENOMEM;
        return NULL;
    }
    symbols->pid = pid;
    symbols->dwfl = dwfl_begin(&sw_proc_callbacks);
    if (symbols->dwfl == NULL) {
        if (error) *error = -1;
        free(symbols);
        return NULL;
    }
    int result = sw_report(symbols);
    if (result != 0) {
        if (error) *error = result;
        sw_symbols_destroy(symbols);
        return NULL;
    }
    return symbols;
}

void sw_symbols_destroy(sw_symbols *symbols) {
    if (symbols == NULL) return;
    dwfl_getmodules(symbols->dwfl, sw_free_module, NULL, 0);
    dwfl_end(symbols->dwfl);
    free(symbols);
}

int sw_symbols_refresh(sw_symbols *symbols) { return symbols->file_module != NULL ? -1 : sw_report(symbols); }

static const Dwfl_Callbacks sw_file_callbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = sw_find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = &debuginfo_path,
};

sw_symbols *sw_symbols_open_file(const char *path, int *error) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (error) *error = errno;
        return NULL;
    }
    return sw_symbols_open_descriptor(fd, path, error);
}

sw_symbols *sw_symbols_open_descriptor(int fd, const char *name, int *error) {
    sw_symbols *symbols = calloc(1, sizeof *symbols);
    if (symbols == NULL) {
        close(fd);
        if (error) *error = ENOMEM;
        return NULL;
    }
    symbols->dwfl = dwfl_begin(&sw_file_callbacks);
    if (symbols->dwfl == NULL) {
        close(fd);
        free(symbols);
        if (error) *error = -1;
        return NULL;
    }
    dwfl_report_begin(symbols->dwfl);
    // libdwfl takes ownership of fd (it closes it on failure too).
    symbols->file_module = dwfl_report_offline(symbols->dwfl, name, name, fd);
    if (dwfl_report_end(symbols->dwfl, NULL, NULL) != 0 || symbols->file_module == NULL) {
        if (error) *error = -1;
        sw_symbols_destroy(symbols);
        return NULL;
    }
    return symbols;
}

int sw_symbols_file_address(sw_symbols *symbols, uint64_t offset, uint64_t *address) {
    if (symbols->file_module == NULL) return -1;
    GElf_Addr bias = 0;
    Elf *elf = dwfl_module_getelf(symbols->file_module, &bias);
    size_t count = 0;
    if (elf == NULL || elf_getphdrnum(elf, &count) != 0) return -1;
    // The load base is where file offset 0 is mapped: the first PT_LOAD's vaddr minus its file offset (debug
    // files keep the program headers of the binary they were split from, so this works for them too).
    for (size_t i = 0; i < count; i++) {
        GElf_Phdr header;
        if (gelf_getphdr(elf, (int)i, &header) == NULL || header.p_type != PT_LOAD) continue;
        *address = bias + (header.p_vaddr - header.p_offset) + offset;
        return 0;
    }
    return -1;
}

int sw_symbols_module(sw_symbols *symbols, uint64_t address, sw_module_info *info) {
    Dwfl_Module *module = dwfl_addrmodule(symbols->dwfl, address);
    if (module == NULL) return -1;
    Dwarf_Addr start = 0, end = 0;
    const char *name = dwfl_module_info(module, NULL, &start, &end, NULL, NULL, NULL, NULL);
    GElf_Addr bias = 0;
    // The build-id is only known once the ELF is open; getelf opens it (and is cached by libdwfl).
    if (dwfl_module_getelf(module, &bias) == NULL) bias = 0;
    const unsigned char *bits = NULL;
    GElf_Addr vaddr = 0;
    int length = dwfl_module_build_id(module, &bits, &vaddr);
    info->path = name;
    info->start = start;
    info->end = end;
    info->bias = bias;
    info->build_id = length > 0 ? bits : NULL;
    info->build_id_length = length > 0 ? (size_t)length : 0;
    return 0;
}

const char *sw_symbols_name(sw_symbols *symbols, uint64_t address, uint64_t *offset) {
    Dwfl_Module *module = dwfl_addrmodule(symbols->dwfl, address);
    if (module == NULL) return NULL;
    GElf_Off symbol_offset = 0;
    GElf_Sym symbol;
    const char *name = dwfl_module_addrinfo(module, address, &symbol_offset, &symbol, NULL, NULL, NULL);
    if (name != NULL && offset != NULL) *offset = symbol_offset;
    return name;
}

const char *sw_symbols_source(sw_symbols *symbols, uint64_t address, int *line) {
    Dwfl_Module *module = dwfl_addrmodule(symbols->dwfl, address);
    if (module == NULL) return NULL;
    int number = 0;
    const char *file = NULL;
    Dwfl_Line *record = dwfl_module_getsrc(module, address);
    int misplaced = 0;
    if (record != NULL) {
        // A line of a CU that does not contain the address (incomplete .debug_aranges, see sw_cu_range) is none.
        Dwarf_Addr bias = 0;
        Dwarf_Die *unit = dwfl_linecu(record);
        if (unit != NULL && dwfl_module_getdwarf(module, &bias) != NULL && dwarf_haspc(unit, address - bias) == 0) {
            record = NULL;
            misplaced = 1;
        }
    }
    if (record != NULL) {
        file = dwfl_lineinfo(record, NULL, &number, NULL, NULL, NULL);
    } else {
        Dwarf_Line *indexed = sw_indexed_line(module, address, misplaced);
        if (indexed != NULL) {
            file = dwarf_linesrc(indexed, NULL, NULL);
            dwarf_lineno(indexed, &number);
        }
    }
    if (line != NULL) *line = file != NULL ? number : 0;
    return file;
}

const char *sw_symbols_last_error(void) { return dwfl_errmsg(-1); }

#endif  // __linux__
