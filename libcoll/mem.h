/*
 * mem.h: memory from coll_mem_alloc, which ranks on the same host can map
 * and read directly (the shared-memory transport's mapped reads,
 * transports/shm/shm_map.c).
 *
 * Each allocation is its own memfd, mapped shared. A transport that sends
 * from such a buffer names the region (its id, memfd and inode) to the
 * receiver, which opens the memfd through /proc or a pidfd and copies
 * straight out of it: one copy, like process_vm_readv, but at memcpy's
 * speed, without the kernel pinning the sender's pages per message.
 */
#ifndef COLL_MEM_H
#define COLL_MEM_H

#include <stddef.h>
#include <stdint.h>

typedef struct coll_mem_region {
    uint64_t id;    /* unique in this process, never reused */
    uint64_t base;  /* its address here */
    uint64_t len;   /* bytes mapped (whole pages) */
    uint64_t ino;   /* of its memfd, for a peer to check the file it opened */
    int fd;         /* the memfd, open until coll_mem_free */
} coll_mem_region_t;

/* 1 and *out when buf[0, len) lies wholly in one region from
 * coll_mem_alloc; 0 when not. Thread-safe. */
int coll_mem_find(const void *buf, size_t len, coll_mem_region_t *out);

#endif /* COLL_MEM_H */
