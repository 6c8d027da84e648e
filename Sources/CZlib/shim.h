// zlib (deflate with a gzip wrapper for pprof exports), found through pkg-config's zlib.pc.
#ifndef CZLIB_SHIM_H
#define CZLIB_SHIM_H
#include <zlib.h>
#endif
