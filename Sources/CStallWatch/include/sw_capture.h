// Placeholder: filled in by the capture work.
#ifndef SW_CAPTURE_H
#define SW_CAPTURE_H
#endif
