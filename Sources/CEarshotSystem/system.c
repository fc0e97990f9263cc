#define _GNU_SOURCE
#include "earshot_system.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

const uint32_t earshot_epollin = EPOLLIN;
const uint32_t earshot_epollout = EPOLLOUT;
const uint32_t earshot_epollrdhup = EPOLLRDHUP;
const uint32_t earshot_epollhup = EPOLLHUP;
const uint32_t earshot_epollerr = EPOLLERR;

int earshot_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

int earshot_epoll_ctl(int epfd, int op, int fd, uint32_t events, uint64_t token) {
    struct epoll_event e;
    e.events = events;
    e.data.u64 = token;
    int ops[3] = {EPOLL_CTL_ADD, EPOLL_CTL_MOD, EPOLL_CTL_DEL};
    if (op < 0 || op > 2) { errno = EINVAL; return -1; }
    return epoll_ctl(epfd, ops[op], fd, &e);
}

int earshot_epoll_wait(int epfd, uint64_t *tokens, uint32_t *events, int capacity, int timeout_ms) {
    struct epoll_event list[256];
    if (capacity > 256) capacity = 256;
    int n = epoll_wait(epfd, list, capacity, timeout_ms);
    if (n < 0) return errno == EINTR ? 0 : -1;
    for (int i = 0; i < n; i++) {
        tokens[i] = list[i].data.u64;
        events[i] = list[i].events;
    }
    return n;
}

int earshot_eventfd(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }

int earshot_accept(int fd) { return accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC); }
