/*
 * shm_pages.c: whether a buffer lies in huge pages.
 *
 * process_vm_readv pins the peer's pages and copies them one page at a
 * time. Above COLL_SHM_CMA_MAX, in 4 KiB pages, that costs 2-3 of the
 * ring's pipelined copies per byte on the development machine, in huge
 * pages (THP or hugetlb) 1-2 (docs/performance-sets.md), so a block there may
 * be read. Linux 6.7's PAGEMAP_SCAN answers for a whole range in one call,
 * and stops at the first page that is not huge. Older kernels refuse the
 * call, and their large blocks keep taking the ring.
 *
 * Debian 12's kernel headers predate the call; its ABI, from the kernel's
 * include/uapi/linux/fs.h, is restated here.
 */
#include <fcntl.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "shm.h"

struct shm_pm_region {
    uint64_t start, end, categories;
};

struct shm_pm_scan_arg {
    uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
    uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};

#define SHM_PAGEMAP_SCAN _IOWR('f', 16, struct shm_pm_scan_arg)
#define SHM_PAGE_IS_HUGE (1ull << 6)

/* Looks for the first page of buf[0, len) that is not huge (absent pages
 * are not): 1 found, 0 none, -1 the call failed. */
static int scan(int fd, const void *buf, size_t len)
{
    const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t first = (uint64_t)(uintptr_t)buf;
    struct shm_pm_region r;
    struct shm_pm_scan_arg a = {.size = sizeof(a), .start = first & ~(page - 1),
                                .end = (first + len + page - 1) & ~(page - 1),
                                .vec = (uint64_t)(uintptr_t)&r, .vec_len = 1, .max_pages = 1,
                                .category_inverted = SHM_PAGE_IS_HUGE,
                                .category_mask = SHM_PAGE_IS_HUGE,
                                .return_mask = SHM_PAGE_IS_HUGE};

    return ioctl(fd, SHM_PAGEMAP_SCAN, &a);
}

int shm_pages_open(void)
{
    int probe = 0, fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);

    if (fd >= 0 && scan(fd, &probe, sizeof(probe)) < 0) { /* before Linux 6.7 */
        close(fd);
        fd = -1;
    }
    return fd;
}

int shm_pages_huge(int fd, const void *buf, size_t len)
{
    return fd >= 0 && len > 0 && scan(fd, buf, len) == 0;
}
