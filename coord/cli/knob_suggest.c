/* What an unknown flag's message suggests: a pointed answer for the
 * spellings ecoord deliberately lacks, else the flags the typed name begins,
 * else the closest spelling when it looks like a typo. */
#include "knobs_impl.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>


#define PASSWORD_WHY                                                                   \
    "there is no password flag: a command line is visible to every user on the host " \
    "(ps, /proc/PID/cmdline) and is kept in shell history and job specs; set "        \
    "ECOORD_ETCD_PASSWORD or pass --etcd_password_file=PATH (a file only you can read)"

/* Spellings users bring from other launchers that ecoord deliberately lacks:
 * a pointed answer beats "unknown flag". */
static const struct {
    const char *name, *why;
} unsupported[] = {
    {"etcd_password", PASSWORD_WHY},
    {"password", PASSWORD_WHY},
    {"ips", "ecoord finds the nodes through etcd: drop --ips and start every node with "
            "the same --elastic_server and --job_id"},
    {"rank", "the leader assigns node ranks: drop --rank"},
};

/* Optimal string alignment distance, case-insensitive; short strings only. */
static int distance(const char *a, const char *b)
{
    int n = (int)strlen(a), m = (int)strlen(b);
    if (n > 63 || m > 63)
        return 99;
    int d[64][64];
    for (int i = 0; i <= n; i++)
        d[i][0] = i;
    for (int j = 0; j <= m; j++)
        d[0][j] = j;
    for (int i = 1; i <= n; i++)
        for (int j = 1; j <= m; j++) {
            int cost = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
            int v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v)
                v = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < v)
                v = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && tolower((unsigned char)a[i - 1]) == tolower((unsigned char)b[j - 2]) &&
                tolower((unsigned char)a[i - 2]) == tolower((unsigned char)b[j - 1]) &&
                d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    return d[n][m];
}

int ec_config_distance(const char *a, const char *b)
{
    return distance(a, b);
}

/* First clause of a knob's help: "number of nodes". */
static void gist(const ec_knob_t *k, char *buf, size_t len)
{
    size_t n = strcspn(k->help, ":;.,");
    if (n < len) {
        memcpy(buf, k->help, n);
        buf[n] = '\0';
        return;
    }
    n = len - 4; /* cut at a word and say so */
    while (n > 0 && k->help[n] != ' ')
        n--;
    snprintf(buf, len, "%.*s...", (int)n, k->help);
}

/* "did you mean --nproc_per_node (processes (ranks) per node)?" for a typed
 * name that matches nothing.  An abbreviation is never accepted, but it says
 * what was meant, so spellings the typed name begins are suggested first; then
 * the closest spelling by edit distance, when close enough to be a typo. */
static void suggest(const char *typed, ec_cmd_t cmd, char *buf, size_t len)
{
    size_t tl = strlen(typed), used = 0;
    int found = 0;
    buf[0] = '\0';
    for (int pass = 0; pass < 2 && !found; pass++) /* this subcommand's knobs first */
        for (int i = 0; i < EC_K__COUNT; i++) {
            const ec_knob_t *k = &ec__knobs[i];
            if (((k->cmds & cmd) != 0) != (pass == 0))
                continue;
            for (int j = 0; j < 3 && k->spellings[j]; j++)
                if (tl && strncasecmp(typed, k->spellings[j], tl) == 0 && found < 4) {
                    char g[48];
                    gist(k, g, sizeof(g));
                    used += (size_t)snprintf(buf + used, used < len ? len - used : 0,
                                             "%s--%s (%s)", found ? ", " : "", k->spellings[j], g);
                    found++;
                }
        }
    if (found)
        return;
    int best = 99;
    const ec_knob_t *bk = NULL;
    const char *bs = NULL;
    for (int i = 0; i < EC_K__COUNT; i++)
        for (int j = 0; j < 3 && ec__knobs[i].spellings[j]; j++) {
            int d = distance(typed, ec__knobs[i].spellings[j]);
            if (d < best || (d == best && bk && !(bk->cmds & cmd) && (ec__knobs[i].cmds & cmd))) {
                best = d;
                bk = &ec__knobs[i];
                bs = ec__knobs[i].spellings[j];
            }
        }
    int limit = tl <= 4 ? 1 : (int)(tl / 3 > 2 ? tl / 3 : 2);
    if (bk && best <= limit) {
        char g[48];
        gist(bk, g, sizeof(g));
        snprintf(buf, len, "--%s (%s)", bs, g);
    }
}

int ec__knob_unknown_flag(const char *dashes, const char *typed, const char *norm, ec_cmd_t cmd,
                          ec_error_t *err)
{
    for (size_t i = 0; i < sizeof(unsupported) / sizeof(unsupported[0]); i++)
        if (strcmp(norm, unsupported[i].name) == 0)
            return ec_errorf(err, EC_EINVAL, "%s%s is not accepted: %s", dashes, typed,
                             unsupported[i].why);
    char sug[256];
    suggest(norm, cmd, sug, sizeof(sug));
    if (sug[0])
        return ec_errorf(err, EC_EINVAL,
                         "unknown flag %s%s; did you mean %s? Flags must be spelled in full "
                         "(abbreviations are never expanded); see ecoord %s --help",
                         dashes, typed, sug, ec_config_cmd_name(cmd));
    return ec_errorf(err, EC_EINVAL, "unknown flag %s%s; see ecoord %s --help for the flags",
                     dashes, typed, ec_config_cmd_name(cmd));
}
