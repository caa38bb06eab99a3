/* Which GPUs a node's training processes get, chosen as Paddle's launchers
 * choose them (launch/context/device.py, fleet/launch_utils.py get_gpus):
 * --gpus/--devices names GPUs as the user sees them, entries of
 * CUDA_VISIBLE_DEVICES when it is set (else CUDA ordinals), and each process
 * is told an index into the visible list.  Paddle passes the whole visible
 * list on and gives FLAGS_selected_gpus=2,3 for --gpus=6,7 under
 * CUDA_VISIBLE_DEVICES=4,5,6,7; ecoord narrows CUDA_VISIBLE_DEVICES to the
 * GPUs the node uses (6,7), so the index is the local rank (0, 1): the same
 * physical GPUs for a Paddle program (FLAGS_selected_gpus), and for a torch
 * program that picks cuda:LOCAL_RANK, which Paddle's choice does not give.
 *
 * The choice is pure (ec_gpus_plan); counting the device nodes is the only
 * I/O (ec_gpus_count_dev), with no CUDA library and one bounded directory
 * read. */
#ifndef EC_GPUS_H
#define EC_GPUS_H

#include "error.h"

#define EC_GPUS_VISIBLE_MAX 4096

typedef struct ec_gpus {
    /* GPUs the node's processes use, one each, local rank i on the i-th;
     * 0: a CPU node (PADDLE_DISTRI_BACKEND=gloo). */
    int n;
    /* CUDA_VISIBLE_DEVICES for every process of the node: those n GPUs in
     * local rank order, as the user named them ("6,7", "GPU-<uuid>,..."). */
    char visible[EC_GPUS_VISIBLE_MAX];
    /* Something the user should hear that is not an error ("" for none). */
    char note[320];
} ec_gpus_t;

/* How many GPUs CUDA_VISIBLE_DEVICES=cvd shows: CUDA reads entries up to the
 * first invalid one, so "", "-1" or "-1,0" show none.  An entry is a
 * non-negative number or a GPU-/MIG- UUID.  *numeric (may be NULL): whether
 * every counted entry is a number. */
int ec_gpus_count_visible(const char *cvd, int *numeric);

/* NVIDIA device nodes (nvidia0, nvidia1, ...; not nvidiactl, nvidia-uvm) in
 * dir, normally "/dev": the GPUs of this machine when CUDA_VISIBLE_DEVICES
 * is unset, counted without loading any CUDA library.  -1 when dir cannot
 * be read. */
int ec_gpus_count_dev(const char *dir);

/* The GPUs for nproc processes.  cvd: CUDA_VISIBLE_DEVICES, NULL when
 * unset; ndev: ec_gpus_count_dev's count (used only when cvd is NULL and no
 * --gpus); gpus/ngpus: --gpus (ngpus 0: not given).  Rules:
 *  - --gpus: every id must be an entry of cvd when it is set (numbers only:
 *    UUID entries cannot be named by number); the first nproc are used;
 *    fewer ids than processes, or an id twice, is an error.
 *  - no --gpus, cvd set: its first nproc entries; none visible is a CPU
 *    node; fewer than nproc is an error.
 *  - no --gpus, cvd unset: CUDA ordinals 0..nproc-1 when the machine has at
 *    least nproc GPUs; fewer (a CPU job on a GPU machine, or too many
 *    processes): a CPU node, with a note.
 * Returns 0, or EC_EINVAL with err saying what is wrong and what to do. */
/* gpus_said/nproc_said: how the user gave them, for messages
 * ("--gpus=6,7", "ECOORD_NPROC_PER_NODE=4"). */
int ec_gpus_plan(const char *cvd, int ndev, const int *gpus, int ngpus, int nproc,
                 const char *gpus_said, const char *nproc_said, ec_gpus_t *out,
                 ec_error_t *err);

#endif
