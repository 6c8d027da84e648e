// Placeholder: filled in by the symbols work.
#ifndef SW_SYMBOLS_H
#define SW_SYMBOLS_H
#endif
