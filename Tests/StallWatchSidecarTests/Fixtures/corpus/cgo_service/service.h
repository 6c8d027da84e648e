/* The C side of cgo_service: functions that block the calling thread, as a C library a Go service calls might. */
#ifndef CGO_SERVICE_H
#define CGO_SERVICE_H
/* Waits for a mutex a C thread named "lock-holder" holds for `ms` milliseconds. */
void cgo_service_lock_held_mutex(int ms);
/* Sleeps `ms` milliseconds in nanosleep. */
void cgo_service_sleep(int ms);
/* Reads a pipe that a C thread writes to after `ms` milliseconds. */
void cgo_service_read_pipe(int ms);
#endif
