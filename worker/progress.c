/* Progress reports (ecw_progress_step/pause/resume): stores into the file
 * the agent gave this process (coord/core/progress_file.h), mapped once.  A step
 * costs one clock read and two relaxed stores; no system call, no etcd
 * write.  Without an agent (ECOORD_PROGRESS_FILE unset, or not mappable)
 * every call does nothing and returns 0, so that a program runs the same
 * with and without ecoord.  Needs no ecw_init: a program with collectives
 * of its own reports steps all the same. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "ecw.h"
#include "clock.h"
#include "progress_file.h"

#include "ecw_impl.h"

static ec_progress_slot_t *slot;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void map_it(void)
{
    const char *path = ecw__progress_path();
    if (!path || !*path)
        return;
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return;
    void *p = mmap(NULL, EC_PROGRESS_FILE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return;
    slot = p;
}

static inline int64_t now_ns(void) { return ec_mono_ns(); }

#define STORE(field, v) \
    atomic_store_explicit((_Atomic __typeof__(slot->field) *)&slot->field, (v), memory_order_relaxed)
#define LOAD(field) \
    atomic_load_explicit((_Atomic __typeof__(slot->field) *)&slot->field, memory_order_relaxed)

static ec_progress_slot_t *get(void)
{
    pthread_once(&once, map_it);
    if (slot && LOAD(magic) != EC_PROGRESS_MAGIC) {
        STORE(version, EC_PROGRESS_VERSION);
        atomic_store_explicit((_Atomic uint32_t *)&slot->magic, EC_PROGRESS_MAGIC,
                              memory_order_release);
    }
    return slot;
}

int ecw_progress_step(void)
{
    if (!get())
        return 0;
    STORE(step_ns, now_ns());
    STORE(step, LOAD(step) + 1);
    return 0;
}

int ecw_progress_pause(void)
{
    if (!get())
        return 0;
    STORE(paused_ns, now_ns());
    return 0;
}

int ecw_progress_resume(void)
{
    if (!get())
        return 0;
    int64_t t = now_ns();
    STORE(resumed_ns, t);
    STORE(paused_ns, (int64_t)0);
    STORE(step_ns, t); /* the pause is not silence: count from here */
    return 0;
}

void ecw__progress_ready(void)
{
    pthread_once(&once, map_it);
    if (slot && !LOAD(ready_ns)) /* not magic: readiness is no step report */
        STORE(ready_ns, now_ns());
}

void ecw__progress_coll_enter(void)
{
    if (get())
        STORE(coll_enter_ns, now_ns());
}

void ecw__progress_coll_exit(int ok)
{
    if (!slot)
        return;
    if (ok)
        STORE(coll_done_ns, now_ns());
    STORE(coll_enter_ns, (int64_t)0);
}
