// Placeholder: filled in by the unwind work.
#ifndef SW_UNWIND_H
#define SW_UNWIND_H
#endif
