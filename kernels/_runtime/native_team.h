/* A team of two for the native replay: the calling thread and one worker thread share the
   products of a decode step, each computing its own half of the output columns.

   Why: at batch 1 a small model's decode step reads every weight once and does little arithmetic
   per byte; on one core the weights stream from L3 (the tiny Transformer's 1.3 MB decoder does not
   fit a 1 MB L2). Split by columns, each core reads half of every weight matrix, always the same
   half, which then stays in its own L2 from one step to the next.

   Protocol (one item at a time, no locks):
   - the caller publishes item s (fn, ctx, then seq = s), computes part 0, then claims part 1 itself
     (claimed: s - 1 -> s) unless the worker claimed it first, in which case it waits for done == s;
   - the worker spins on seq while the team is held, claims part 1 of each new item by the same
     compare-and-swap, runs it and publishes done = s.
   Every part 1 is run exactly once, by whichever thread claims it: a worker that is descheduled
   (another process on its core) simply loses the race, and the caller computes both halves. A
   caller that had to wait long for a claimed part (the worker was preempted mid-item) stops using
   the team for a while (SJ_TEAM_BACKOFF_NS), so a busy machine costs at most one such wait per
   back-off period.

   The team is held by one caller at a time (sj_team_acquire fails for the others: they run on their
   own thread); the worker spins only while it is held and for SJ_TEAM_LINGER_NS after (so the
   encoder run and the decode loop of one call share one wake-up), then sleeps on a condition
   variable. */
#ifndef SJ_NATIVE_TEAM_H
#define SJ_NATIVE_TEAM_H
#include <pthread.h>
#include <stdint.h>
#include <time.h>
#include <sched.h>

#define SJ_TEAM_LINGER_NS 100000LL    /* 100 us of spinning after a release */
#define SJ_TEAM_WAIT_NS 200000LL      /* a claimed part not done after this: the worker was preempted */
#define SJ_TEAM_BACKOFF_NS 50000000LL /* then no team for 50 ms */
#define SJ_TEAM_PROBE 64              /* ... and when more than half of the last this many items
                                         were taken back by the caller: the same */

typedef void (*sj_team_fn)(void *ctx, int part);

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int started, held, active, degraded;
    int runs;  /* native runs in progress in this process (any thread): the team only for a lone run */
    int64_t seq, claimed, done, linger_until, backoff_until;
    sj_team_fn fn;
    void *ctx;
    int64_t waits, steals, items;  /* statistics, for tests and tuning */
    int64_t recent_items, recent_steals, recent_waits;  /* since the last probe (across holds) */
} sj_team = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};

static inline int64_t sj_now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static inline void sj_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* nothing for the worker to do: the holder runs alone (degraded), or nobody holds the team and the
   linger time after the last release is over */
static inline int sj_team_idle(void) {
    if (__atomic_load_n(&sj_team.degraded, __ATOMIC_ACQUIRE))
        return 1;
    return !__atomic_load_n(&sj_team.held, __ATOMIC_ACQUIRE)
           && sj_now_ns() > __atomic_load_n(&sj_team.linger_until, __ATOMIC_ACQUIRE);
}

static void *sj_team_worker(void *arg) {
    (void)arg;
    int64_t seen = __atomic_load_n(&sj_team.seq, __ATOMIC_ACQUIRE);
    for (;;) {
        pthread_mutex_lock(&sj_team.mu);
        while (!__atomic_load_n(&sj_team.active, __ATOMIC_ACQUIRE))
            pthread_cond_wait(&sj_team.cv, &sj_team.mu);
        pthread_mutex_unlock(&sj_team.mu);
        unsigned idle = 0;
        for (;;) {
            int64_t s = __atomic_load_n(&sj_team.seq, __ATOMIC_ACQUIRE);
            if (s != seen) {
                seen = s;
                int64_t expect = s - 1;
                if (__atomic_compare_exchange_n(&sj_team.claimed, &expect, s, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
                    sj_team.fn(sj_team.ctx, 1);
                    __atomic_store_n(&sj_team.done, s, __ATOMIC_RELEASE);
                }
                idle = 0;
                continue;
            }
            sj_pause();
            if (++idle % 256 == 0 && sj_team_idle()) {
                pthread_mutex_lock(&sj_team.mu);
                if (sj_team_idle())
                    __atomic_store_n(&sj_team.active, 0, __ATOMIC_RELEASE);
                pthread_mutex_unlock(&sj_team.mu);
                break;
            }
        }
    }
    return NULL;
}

/* in a child made by fork(): no worker thread exists there, and the parent's lock may have been
   held at the fork; start afresh */
static void sj_team_after_fork(void) {
    pthread_mutex_init(&sj_team.mu, NULL);
    pthread_cond_init(&sj_team.cv, NULL);
    sj_team.started = sj_team.held = sj_team.active = sj_team.degraded = 0;
    sj_team.seq = sj_team.claimed = sj_team.done = 0;
    sj_team.runs = 0;  /* the runs of the parent's other threads do not go on here */
}

/* the child handler, registered once by the first run (whether or not the team ever starts: a
   child inheriting the parent's count of runs in progress would never take the team) */
static pthread_once_t sj_team_fork_once = PTHREAD_ONCE_INIT;
static void sj_team_register_fork(void) { pthread_atfork(NULL, NULL, sj_team_after_fork); }

/* Hold the team for this thread: 1 on success (the worker is woken or still spinning), 0 when
   another caller holds it, the team is backing off, or no thread could be started. */
static int sj_team_acquire(void) {
    int free_ = 0;
    if (__atomic_load_n(&sj_team.runs, __ATOMIC_ACQUIRE) > 1)
        return 0;  /* other runs in progress: the cores are taken */
    if (!__atomic_compare_exchange_n(&sj_team.held, &free_, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return 0;
    if (sj_now_ns() < __atomic_load_n(&sj_team.backoff_until, __ATOMIC_ACQUIRE)) {
        __atomic_store_n(&sj_team.held, 0, __ATOMIC_RELEASE);
        return 0;
    }
    pthread_mutex_lock(&sj_team.mu);
    if (!sj_team.started) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        sj_team.started = pthread_create(&t, &attr, sj_team_worker, NULL) == 0 ? 1 : -1;
        pthread_attr_destroy(&attr);
    }
    if (sj_team.started < 0) {
        pthread_mutex_unlock(&sj_team.mu);
        __atomic_store_n(&sj_team.held, 0, __ATOMIC_RELEASE);
        return 0;
    }
    __atomic_store_n(&sj_team.degraded, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&sj_team.active, 1, __ATOMIC_RELEASE);
    pthread_cond_signal(&sj_team.cv);
    pthread_mutex_unlock(&sj_team.mu);
    return 1;
}

/* whether the current hold went serial (the worker was late twice, or another run started): such a
   run's time says nothing of the team's */
static int sj_team_degraded(void) { return __atomic_load_n(&sj_team.degraded, __ATOMIC_ACQUIRE); }

/* forget a back-off (tests) */
static void sj_team_forgive(void) {
    __atomic_store_n(&sj_team.backoff_until, 0, __ATOMIC_RELEASE);
    sj_team.recent_items = sj_team.recent_steals = sj_team.recent_waits = 0;
}

/* items published, parts the caller took back (the worker was not there in time), long waits */
static void sj_team_counts(long long *out) {
    out[0] = sj_team.items;
    out[1] = sj_team.steals;
    out[2] = sj_team.waits;
}

/* every native run, team or not, counts itself in and out (sj_team_run leaves the team alone when
   another run starts meanwhile) */
static void sj_team_enter(void) {
    pthread_once(&sj_team_fork_once, sj_team_register_fork);
    __atomic_add_fetch(&sj_team.runs, 1, __ATOMIC_ACQ_REL);
}
static void sj_team_leave(void) { __atomic_sub_fetch(&sj_team.runs, 1, __ATOMIC_ACQ_REL); }

static void sj_team_release(void) {
    __atomic_store_n(&sj_team.linger_until, sj_now_ns() + SJ_TEAM_LINGER_NS, __ATOMIC_RELEASE);
    __atomic_store_n(&sj_team.held, 0, __ATOMIC_RELEASE);
}

/* Run fn(ctx, 0) here and fn(ctx, 1) on whichever thread claims it; returns when both are done.
   Returns 1 when the caller had to wait long for the worker (the team should back off). */
static int sj_team_run(sj_team_fn fn, void *ctx) {
    if (!sj_team.degraded && __atomic_load_n(&sj_team.runs, __ATOMIC_ACQUIRE) > 1)
        __atomic_store_n(&sj_team.degraded, 1, __ATOMIC_RELEASE);  /* another run wants the other core */
    if (sj_team.degraded) {  /* on our own until release (see the callers of degraded) */
        fn(ctx, 0);
        fn(ctx, 1);
        return 0;
    }
    int64_t s = sj_team.seq + 1;  /* only the holder writes seq */
    sj_team.fn = fn;
    sj_team.ctx = ctx;
    __atomic_store_n(&sj_team.seq, s, __ATOMIC_RELEASE);
    sj_team.items++;
    if (++sj_team.recent_items >= SJ_TEAM_PROBE) {
        /* the worker missed most of the last items (its core is busy): stop handing them out */
        if (sj_team.recent_steals * 2 > sj_team.recent_items) {
            __atomic_store_n(&sj_team.degraded, 1, __ATOMIC_RELEASE);
            __atomic_store_n(&sj_team.backoff_until, sj_now_ns() + SJ_TEAM_BACKOFF_NS, __ATOMIC_RELEASE);
        }
        sj_team.recent_items = sj_team.recent_steals = sj_team.recent_waits = 0;
    }
    int64_t part_start = sj_now_ns();
    fn(ctx, 0);
    int64_t expect = s - 1;
    if (__atomic_compare_exchange_n(&sj_team.claimed, &expect, s, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        sj_team.steals++;
        sj_team.recent_steals++;
        fn(ctx, 1);
        return 0;
    }
    if (__atomic_load_n(&sj_team.done, __ATOMIC_ACQUIRE) == s)
        return 0;
    int64_t start = sj_now_ns();
    /* the worker's part is as large as ours: it was preempted only when it is still not done after
       our own part's time plus SJ_TEAM_WAIT_NS (a fixed limit alone is shorter than one half of a
       large product: m2m100's 16 MB matrices at 1 row) */
    int64_t limit = SJ_TEAM_WAIT_NS + (start - part_start);
    unsigned spins = 0;
    while (__atomic_load_n(&sj_team.done, __ATOMIC_ACQUIRE) != s) {
        sj_pause();
        if (++spins % 1024 == 0 && sj_now_ns() - start > limit) {
            while (__atomic_load_n(&sj_team.done, __ATOMIC_ACQUIRE) != s)
                sched_yield();
            sj_team.waits++;
            /* one late part is a hiccup of the worker's core (a host's steal time); a second one
               within SJ_TEAM_PROBE items means its core is busy: then back off */
            if (++sj_team.recent_waits < 2)
                return 0;
            __atomic_store_n(&sj_team.degraded, 1, __ATOMIC_RELEASE);
            __atomic_store_n(&sj_team.backoff_until, sj_now_ns() + SJ_TEAM_BACKOFF_NS, __ATOMIC_RELEASE);
            return 1;
        }
    }
    return 0;
}
#endif
