// A thin wrapper over elfutils' libdwfl: modules, symbols and source lines of a live process's addresses.
#ifndef SW_SYMBOLS_H
#define SW_SYMBOLS_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/// An opaque libdwfl session for one process. Not thread-safe: use one per thread, or serialise access.
typedef struct sw_symbols sw_symbols;

/// The module an address falls in. Strings point into the session and stay valid until the next
/// `sw_symbols_refresh` or `sw_symbols_destroy`.
typedef struct sw_module_info {
    /// The module's name as libdwfl reported it (the mapped file's path, or "[vdso]").
    const char *path;
    /// The lowest and one-past-the-highest address the module covers.
    uint64_t start;
    uint64_t end;
    /// Load bias: runtime address minus ELF virtual address (0 if the ELF could not be opened).
    uint64_t bias;
    /// The GNU build-id bytes, or NULL with `build_id_length` 0 when the module has none.
    const unsigned char *build_id;
    size_t build_id_length;
} sw_module_info;

/// Opens a session for `pid` and reports its mapped modules (from /proc/PID/maps).
/// Returns NULL on failure; `*error` (if non-NULL) then holds an errno value or -1 for a libdwfl error.
/// Not async-signal-safe.
sw_symbols *sw_symbols_create(pid_t pid, int *error);

/// Frees the session and everything it opened. Accepts NULL. Not async-signal-safe.
void sw_symbols_destroy(sw_symbols *symbols);

/// Re-reads the process's mappings (after a dlopen or dlclose), keeping the caches of modules that are still
/// mapped. Returns 0 on success. Not async-signal-safe.
int sw_symbols_refresh(sw_symbols *symbols);

/// Fills `*info` for the module containing `address`. Returns 0 when found, -1 when no module covers it.
/// Opens the module's ELF on first use (to read the build-id and bias). Not async-signal-safe.
int sw_symbols_module(sw_symbols *symbols, uint64_t address, sw_module_info *info);

/// The (mangled) name of the ELF symbol containing `address`, or NULL; `*offset` gets the bytes from the
/// symbol's start. The string stays valid until `sw_symbols_refresh` or `sw_symbols_destroy`.
/// Not async-signal-safe.
const char *sw_symbols_name(sw_symbols *symbols, uint64_t address, uint64_t *offset);

/// The source file of `address` from DWARF line tables, or NULL when there is no line information; `*line`
/// gets the line number (0 if unknown). Validity as for `sw_symbols_name`. Not async-signal-safe.
const char *sw_symbols_source(sw_symbols *symbols, uint64_t address, int *line);

/// Opens a session for one ELF file on disk (an executable, a shared object, or a separate debug file) rather
/// than a live process, to symbolicate a report offline. Separate DWARF is looked up under
/// /usr/lib/debug/.build-id/ as for processes. Never call `sw_symbols_refresh` on such a session.
/// Returns NULL on failure; `*error` (if non-NULL) then holds an errno value or -1 for a libdwfl error.
/// Not async-signal-safe.
sw_symbols *sw_symbols_open_file(const char *path, int *error);

/// As `sw_symbols_open_file`, for a file already open as `fd` (which the session takes over and closes, also on
/// failure); `name` labels the module. Opening the exact file that was checked (by inode, or through
/// /proc/PID/map_files) keeps a cache keyed by that check honest when the path is replaced meanwhile.
/// Not async-signal-safe.
sw_symbols *sw_symbols_open_descriptor(int fd, const char *name, int *error);

/// For a session from `sw_symbols_open_file` or `sw_symbols_open_descriptor`: the address to pass to
/// `sw_symbols_name`/`sw_symbols_source` for a location `offset` bytes past the image's load base (where file
/// offset 0 is mapped), as reports record it. Returns 0 on success, -1 when the file has no loadable segment. Not async-signal-safe.
int sw_symbols_file_address(sw_symbols *symbols, uint64_t offset, uint64_t *address);

/// Where a function lies in its ELF file: `offset` is the file offset of its first byte (the runtime address minus
/// the image's load base, the address of file offset 0), `size` its length in bytes; size 0 when not found.
typedef struct sw_function_range {
    uint64_t offset;
    uint64_t size;
} sw_function_range;

/// Looks up the functions `names` (exact symbol names) in the symbol table (`.symtab`, else `.dynsym`) of the ELF
/// file open as `fd` (read through libelf with a private mapping; `fd` stays the caller's). With a `marker`, only a
/// file that has a section of that name is searched, so files of other kinds cost one pass over the section
/// headers. Fills `functions[i]` for `names[i]`. Returns how many names were found, -1 when the file is not ELF, -2
/// when it has no `marker` section. Not async-signal-safe.
int sw_symbols_find_functions(int fd, const char *marker, const char *const *names, size_t count,
                              sw_function_range *functions);

/// libdwfl's message for its most recent error on this thread (never NULL). Not async-signal-safe.
const char *sw_symbols_last_error(void);

#ifdef __cplusplus
}
#endif
#endif
