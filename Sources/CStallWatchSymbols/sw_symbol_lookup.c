// Functions found by name in one ELF file's symbol table (see sw_symbols_find_functions in sw_symbols.h).
#ifdef __linux__
#include "sw_symbols.h"

#include <gelf.h>
#include <libelf.h>
#include <string.h>

// The section named `name`, or NULL.
static Elf_Scn *section_named(Elf *elf, size_t names, const char *name) {
    Elf_Scn *section = NULL;
    while ((section = elf_nextscn(elf, section)) != NULL) {
        GElf_Shdr header;
        if (gelf_getshdr(section, &header) == NULL) continue;
        const char *found = elf_strptr(elf, names, header.sh_name);
        if (found != NULL && strcmp(found, name) == 0) return section;
    }
    return NULL;
}

// The first section of type `type` (SHT_SYMTAB, SHT_DYNSYM), or NULL.
static Elf_Scn *section_of_type(Elf *elf, GElf_Word type) {
    Elf_Scn *section = NULL;
    while ((section = elf_nextscn(elf, section)) != NULL) {
        GElf_Shdr header;
        if (gelf_getshdr(section, &header) != NULL && header.sh_type == type) return section;
    }
    return NULL;
}

// Fills `functions` from one symbol table; returns how many of the names it found.
static int scan(Elf *elf, Elf_Scn *table, const char *const *names, size_t count, sw_function_range *functions) {
    GElf_Shdr header;
    Elf_Data *data = elf_getdata(table, NULL);
    if (gelf_getshdr(table, &header) == NULL || data == NULL || header.sh_entsize == 0) return 0;
    size_t symbols = header.sh_size / header.sh_entsize;
    int found = 0;
    for (size_t i = 0; i < symbols && (size_t)found < count; i++) {
        GElf_Sym symbol;
        if (gelf_getsym(data, (int)i, &symbol) == NULL || GELF_ST_TYPE(symbol.st_info) != STT_FUNC) continue;
        if (symbol.st_shndx == SHN_UNDEF || symbol.st_shndx >= SHN_LORESERVE || symbol.st_size == 0) continue;
        const char *name = elf_strptr(elf, header.sh_link, symbol.st_name);
        if (name == NULL) continue;
        for (size_t n = 0; n < count; n++) {
            if (functions[n].size != 0 || strcmp(name, names[n]) != 0) continue;
            // From the symbol's virtual address to its file offset, through the section that holds it.
            GElf_Shdr holder;
            Elf_Scn *section = elf_getscn(elf, symbol.st_shndx);
            if (section == NULL || gelf_getshdr(section, &holder) == NULL || symbol.st_value < holder.sh_addr) break;
            functions[n].offset = symbol.st_value - holder.sh_addr + holder.sh_offset;
            functions[n].size = symbol.st_size;
            found++;
            break;
        }
    }
    return found;
}

int sw_symbols_find_functions(int fd, const char *marker, const char *const *names, size_t count,
                              sw_function_range *functions) {
    memset(functions, 0, count * sizeof *functions);
    if (elf_version(EV_CURRENT) == EV_NONE) return -1;
    Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    if (elf == NULL) return -1;
    int result = -1;
    size_t names_index = 0;
    if (elf_kind(elf) == ELF_K_ELF && elf_getshdrstrndx(elf, &names_index) == 0) {
        if (marker != NULL && section_named(elf, names_index, marker) == NULL) {
            result = -2;
        } else {
            Elf_Scn *table = section_of_type(elf, SHT_SYMTAB);
            if (table == NULL) table = section_of_type(elf, SHT_DYNSYM);
            result = table != NULL ? scan(elf, table, names, count, functions) : 0;
        }
    }
    elf_end(elf);
    return result;
}

#endif  // __linux__
