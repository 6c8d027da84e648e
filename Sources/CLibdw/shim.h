// elfutils' libdw and libdwfl (modules, ELF symbols, DWARF lines), found through pkg-config's libdw.pc.
#ifndef CLIBDW_SHIM_H
#define CLIBDW_SHIM_H
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>
#endif
