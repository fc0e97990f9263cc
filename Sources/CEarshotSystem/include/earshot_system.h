// The Linux calls a service needs that Swift's Glibc module does not bring in (epoll, eventfd,
// accept4), as plain functions and constants: epoll_event is a packed struct, so its fields
// are read and written here in C.
#ifndef EARSHOT_SYSTEM_H
#define EARSHOT_SYSTEM_H

#include <stdint.h>

extern const uint32_t earshot_epollin;
extern const uint32_t earshot_epollout;
extern const uint32_t earshot_epollrdhup;
extern const uint32_t earshot_epollhup;
extern const uint32_t earshot_epollerr;

/// epoll_create1(EPOLL_CLOEXEC).
int earshot_epoll_create(void);
/// op: 0 add, 1 modify, 2 delete. Returns 0 or -1 (errno set).
int earshot_epoll_ctl(int epfd, int op, int fd, uint32_t events, uint64_t token);
/// Up to `capacity` ready descriptors: their tokens and event masks. Returns the count, 0 on
/// timeout, -1 on error (EINTR counts as 0).
int earshot_epoll_wait(int epfd, uint64_t *tokens, uint32_t *events, int capacity, int timeout_ms);
/// A non-blocking, close-on-exec eventfd.
int earshot_eventfd(void);
/// accept4 with SOCK_NONBLOCK | SOCK_CLOEXEC.
int earshot_accept(int fd);

#endif
