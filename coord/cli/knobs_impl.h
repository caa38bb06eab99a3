/* Inside the knob table: what coord/cli/knobs.c and the knob_*.c files
 * share (not for callers; they use knobs.h).
 *
 *   knobs.c        the table (one row per knob), the subcommands, the
 *                  environment's one reader, and the driver: flags, then
 *                  environment aliases, then the rules below
 *   knob_parse.c   one knob's value from text: the parsers, the checks of
 *                  single values, a knob's storage
 *   knob_suggest.c what an unknown flag's message suggests
 *   knob_rules.c   the rules that tie several knobs together: defaults that
 *                  depend on others (resolve), ec_config_validate
 *   knob_help.c    --help, the start-up summary and the configuration dump
 */
#ifndef EC_CLI_KNOBS_IMPL_H
#define EC_CLI_KNOBS_IMPL_H

#include <stddef.h>

#include "knobs.h"

#define JOB_ID_MAX 128
#define NODE_ID_MAX 253
#define PASSWORD_MAX 4096

/* The storage of knob k in cfg, as a T *. */
#define FIELD(cfg, k, T) ((T *)((char *)(cfg) + (k)->offset))

/* ---- the table (knobs.c) ------------------------------------------------ */

extern const ec_knob_t ec__knobs[EC_K__COUNT];

typedef struct ec__command {
    ec_cmd_t cmd;
    const char *name, *usage, *summary;
} ec__command_t;
extern const ec__command_t ec__commands[];
extern const size_t ec__ncommands;

/* The environment read besides the knobs' aliases, with why (--help). */
typedef struct ec__env_note {
    const char *name, *why;
} ec__env_note_t;
extern const ec__env_note_t ec__env_other[];
extern const size_t ec__nenv_other;

/* Add a warning to cfg->warnings (at most EC_CONFIG_MAX_WARNINGS). */
void ec__knob_warnf(ec_config_t *cfg, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- one value from text (knob_parse.c) ---------------------------------- */

/* Parse v for knob k into cfg.  where names the value for messages
 * ("--np=4:2", "ECOORD_NP=4:2 (environment)"); fix is how to write it again
 * ("--np=", "ECOORD_NP=").  On error cfg is unchanged. */
int ec__knob_set_value(ec_config_t *cfg, const ec_knob_t *k, const char *v, const char *where,
                       const char *fix, ec_error_t *err);
/* "--np=4:2" into buf, with a long value shortened. */
void ec__knob_describe(char *buf, size_t len, const char *pre, const char *name, const char *v,
                       const char *post);
/* Release one knob's storage; a secret is zeroed first. */
void ec__knob_free_field(ec_config_t *cfg, const ec_knob_t *k);
void ec__knob_free_secret(char **p);

/* Strict decimal integer; -1 when s is not one. */
int ec__knob_parse_ll(const char *s, long long *out);
/* Next comma-separated item of *p, trimmed, into buf: 0, -1 at the end, -2
 * when the item is too long. */
int ec__knob_next_item(const char **p, char *buf, size_t len);
/* --hang_timeout's value as milliseconds (-1 auto, 0 off); -1 when invalid. */
int ec__knob_hang_timeout_ms(const char *v, long long *ms);
/* --straggler_factor's value (0 off); -1 when invalid. */
int ec__knob_straggler_factor(const char *v, double *x);
/* Values as a person writes them: 30, 0.5; 0,1,2. */
void ec__knob_fmt_seconds(long long ms, char *buf, size_t len);
int ec__knob_fmt_intlist(const ec_intlist_t *l, char *buf, size_t len);
/* The example value of k for messages. */
const char *ec__knob_example(const ec_knob_t *k);

/* The checks of single values the table's rows name (.check). */
int ec__knob_check_endpoint(const char *v, const char *where, const char *fix, ec_error_t *err);
int ec__knob_check_prefix(const char *v, const char *where, const char *fix, ec_error_t *err);
int ec__knob_check_job_id(const char *v, const char *where, const char *fix, ec_error_t *err);
int ec__knob_check_node_id(const char *v, const char *where, const char *fix, ec_error_t *err);
int ec__knob_check_host(const char *v, const char *where, const char *fix, ec_error_t *err);
int ec__knob_check_proxy(const char *v, const char *where, const char *fix, ec_error_t *err);
int ec__knob_check_run_mode(const char *v, const char *where, const char *fix, ec_error_t *err);
int ec__knob_check_role(const char *v, const char *where, const char *fix, ec_error_t *err);
int ec__knob_check_hang_timeout(const char *v, const char *where, const char *fix,
                                ec_error_t *err);
int ec__knob_check_straggler(const char *v, const char *where, const char *fix, ec_error_t *err);

/* ---- unknown flags (knob_suggest.c) -------------------------------------- */

/* The error for a flag no knob spells (dashes and typed as the user wrote
 * them, norm with '_' for '-'): why it is not accepted, or what was meant. */
int ec__knob_unknown_flag(const char *dashes, const char *typed, const char *norm, ec_cmd_t cmd,
                          ec_error_t *err);

/* ---- rules across knobs (knob_rules.c) ----------------------------------- */

/* Defaults that depend on other knobs or on the machine, and warnings. */
int ec__knob_resolve(ec_config_t *cfg, ec_getenv_fn env, void *env_arg, ec_error_t *err);

#endif
