// libunwind's remote API and its ptrace accessors, as Debian's libunwind-dev ships them (headers under the
// multiarch include directory, found through pkg-config's libunwind-ptrace.pc). Used only from C: the API names
// are macros (unw_init_remote expands to _Ux86_64_init_remote).
#ifndef CLIBUNWIND_SHIM_H
#define CLIBUNWIND_SHIM_H
#include <libunwind.h>
#include <libunwind-ptrace.h>
#endif
