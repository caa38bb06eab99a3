/* What the table prints: --help (every knob of a subcommand, by group), the
 * one-line summary of what the user set and the full configuration dump. */
#include "knobs_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What `ecoord launch` exits with, for --help (coord/agent/launch.c decides). */
static const struct {
    const char *code, *why;
} exit_codes[] = {
    {"0", "the job completed: every process of every node exited 0."},
    {"CODE", "fault tolerance off (--elastic_level=-1, the default without --max_restart or "
             "an --np range): a training process failed and this is its exit code, or "
             "128+N when signal N killed it; the job is failed and the other nodes exit 1."},
    {"1", "this node cannot or must not go on: a configuration error found before the job "
          "(no program, no etcd, a wrong interpreter), the job did not form within "
          "--join_timeout, the job failed (another node's failure with fault tolerance off), "
          "or an elastic job's node gave up after --max_restart (--node_failure_exit); under "
          "ecoord torchrun every failure, as torchrun's."},
    {"2", "usage: an unknown flag or a bad value; nothing was started."},
    {"101", "fault tolerance on: this node's processes failed past --max_restart in a "
            "fixed-size job and the node left it: replace this node (a new pod), the others "
            "wait for it (--fixed_failure_exit)."},
    {"128+N", "the agent was stopped by signal N: 143 (SIGTERM), 130 (SIGINT) and 129 "
              "(SIGHUP: its terminal closed) after a graceful leave."},
};

static const char *const groups[] = {"etcd",    "job",    "this node", "hangs and stragglers",
                                     "program", "output", NULL};

/* ------------------------------------------------------------------------ */
/* help and dump                                                            */

/* Print text wrapped at width, each line indented by indent. */
static void wrap(FILE *f, const char *text, int indent, int width)
{
    const char *p = text;
    while (*p) {
        while (*p == ' ')
            p++;
        int room = width - indent, n = (int)strlen(p);
        if (n > room) {
            n = room;
            while (n > 0 && p[n] != ' ')
                n--;
            if (n == 0) /* one long word: let it overflow */
                n = (int)strcspn(p, " ");
        }
        fprintf(f, "%*s%.*s\n", indent, "", n, p);
        p += n;
    }
}

static void help_knob(FILE *f, const ec_knob_t *k)
{
    char line[512];
    size_t used = 0;
    if (!k->spellings[0]) {
        fprintf(f, "  env %s\n", k->env[0]);
    } else {
        for (int j = 0; j < 3 && k->spellings[j]; j++) {
            if (k->type == EC_KT_BOOL)
                used += (size_t)snprintf(line + used, sizeof(line) - used, "%s--%s[=BOOL]",
                                         j ? ", " : "", k->spellings[j]);
            else
                used += (size_t)snprintf(line + used, sizeof(line) - used, "%s--%s=%s",
                                         j ? ", " : "", k->spellings[j], k->metavar);
        }
        fprintf(f, "  %s\n", line);
    }
    wrap(f, k->help, 6, 79);
    used = 0;
    line[0] = '\0';
    used += (size_t)snprintf(line, sizeof(line), "default: %s",
                             k->def_help ? k->def_help : k->def);
    if (k->spellings[0] && k->env[0]) {
        used += (size_t)snprintf(line + used, sizeof(line) - used, "%senv: ", used ? "; " : "");
        for (int j = 0; j < 3 && k->env[j]; j++)
            used += (size_t)snprintf(line + used, sizeof(line) - used, "%s%s", j ? ", " : "",
                                     k->env[j]);
        if (k->env[1])
            used += (size_t)snprintf(line + used, sizeof(line) - used, " (first set wins)");
    }
    if (line[0])
        wrap(f, line, 6, 79);
}

char *ec_config_help(const char *subcommand)
{
    char *buf = NULL;
    size_t len = 0;
    ec_cmd_t cmd = 0;
    size_t ci = 0;
    if (subcommand) {
        for (ci = 0; ci < ec__ncommands; ci++)
            if (strcmp(subcommand, ec__commands[ci].name) == 0)
                break;
        if (ci == ec__ncommands)
            return NULL;
        cmd = ec__commands[ci].cmd;
    }
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    if (!cmd) {
        fprintf(f, "usage: ecoord COMMAND [FLAGS]\n\ncommands:\n");
        for (size_t i = 0; i < ec__ncommands; i++) {
            fprintf(f, "  %s\n", ec__commands[i].name);
            wrap(f, ec__commands[i].summary, 6, 79);
        }
        fprintf(f, "\nSee ecoord COMMAND --help for a command's flags.\n");
    } else {
        fprintf(f, "usage: %s\n\n", ec__commands[ci].usage);
        wrap(f, ec__commands[ci].summary, 0, 79);
        fprintf(f, "\n");
        wrap(f,
             "Write --name=VALUE or --name VALUE, a boolean --name or --name=BOOL (true, "
             "false; never --name false); dashes and underscores are the same "
             "(--job-id is --job_id). Flags are spelled in full: abbreviations are never "
             "accepted. An environment variable applies only when its flag is not given: "
             "the flag wins.",
             0, 79);
        if (cmd == EC_CMD_LAUNCH) {
            fprintf(f, "\n");
            wrap(f,
                 "PROGRAM is the first word that is not a flag, or whatever follows --; it "
                 "and its arguments are passed through untouched.",
                 0, 79);
        }
        for (int g = 0; groups[g]; g++) {
            int any = 0;
            for (int i = 0; i < EC_K__COUNT; i++) {
                const ec_knob_t *k = &ec__knobs[i];
                if (!(k->cmds & cmd) || strcmp(k->group, groups[g]) != 0)
                    continue;
                if (!any++)
                    fprintf(f, "\n%s:\n", groups[g]);
                help_knob(f, k);
            }
        }
        fprintf(f, "\n  -h, --help\n      this text.\n");
        if (cmd == EC_CMD_LAUNCH) {
            fprintf(f, "\nexit codes:\n");
            for (size_t i = 0; i < sizeof(exit_codes) / sizeof(exit_codes[0]); i++) {
                fprintf(f, "  %s\n", exit_codes[i].code);
                wrap(f, exit_codes[i].why, 6, 79);
            }
        }
        fprintf(f, "\nenvironment read besides the aliases above:\n");
        for (size_t i = 0; i < ec__nenv_other; i++) {
            fprintf(f, "  %s\n", ec__env_other[i].name);
            wrap(f, ec__env_other[i].why, 6, 79);
        }
    }
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* The value of knob k as the dump shows it. */
static void fmt_value(const ec_config_t *cfg, const ec_knob_t *k, char *buf, size_t len)
{
    size_t used = 0;
    switch (k->type) {
    case EC_KT_STRING: {
        const char *s = *FIELD(cfg, k, char *);
        snprintf(buf, len, "%s", s && *s ? s : "(not set)");
        break;
    }
    case EC_KT_SECRET: {
        const char *s = *FIELD(cfg, k, char *);
        snprintf(buf, len, "%s", s && *s ? "(set, hidden)" : "(not set)");
        break;
    }
    case EC_KT_STRLIST: {
        const ec_strlist_t *l = FIELD(cfg, k, ec_strlist_t);
        buf[0] = '\0';
        for (int i = 0; i < l->n; i++)
            used += (size_t)snprintf(buf + used, used < len ? len - used : 0, "%s%s",
                                     i ? "," : "", l->v[i]);
        if (!l->n)
            snprintf(buf, len, "(not set)");
        break;
    }
    case EC_KT_INTLIST:
        ec__knob_fmt_intlist(FIELD(cfg, k, ec_intlist_t), buf, len);
        if (!FIELD(cfg, k, ec_intlist_t)->n)
            snprintf(buf, len, "(not set)");
        break;
    case EC_KT_INT:
        snprintf(buf, len, "%d", *FIELD(cfg, k, int));
        break;
    case EC_KT_SECONDS:
        ec__knob_fmt_seconds(*FIELD(cfg, k, int64_t), buf, len);
        used = strlen(buf);
        snprintf(buf + used, len - used, "s");
        break;
    case EC_KT_BOOL:
        snprintf(buf, len, "%s", *FIELD(cfg, k, int) ? "true" : "false");
        break;
    case EC_KT_ENUM:
        snprintf(buf, len, "%s", k->choices[*FIELD(cfg, k, int)]);
        break;
    case EC_KT_RANGE: {
        const ec_range_t *r = FIELD(cfg, k, ec_range_t);
        if (!r->min && !r->max)
            snprintf(buf, len, "(not set)");
        else if (r->min == r->max && k->sep == ':')
            snprintf(buf, len, "%d", r->min);
        else
            snprintf(buf, len, "%d%c%d", r->min, k->sep, r->max);
        break;
    }
    }
}

char *ec_config_summary(const ec_config_t *cfg)
{
    char *buf = NULL;
    size_t len = 0;
    if (!cfg || !cfg->cmd)
        return NULL;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    int given = 0, defaults = 0;
    fputs("configuration:", f);
    for (int i = 0; i < EC_K__COUNT; i++) {
        const ec_knob_t *k = &ec__knobs[i];
        if (!(k->cmds & cfg->cmd))
            continue;
        const ec_source_t *src = &cfg->src[i];
        if (src->kind != EC_SRC_FLAG && src->kind != EC_SRC_ENV && src->kind != EC_SRC_FILE) {
            defaults++;
            continue;
        }
        char v[1024];
        fmt_value(cfg, k, v, sizeof(v));
        fprintf(f, " %s=%s (%s%s)", k->name, v, src->kind == EC_SRC_FLAG ? "--" : "",
                src->name ? src->name : "?");
        given++;
    }
    if (!given)
        fputs(" every knob at its default", f);
    fprintf(f, "; %d at their defaults (--log_level=debug lists every knob and where it came "
            "from)", defaults);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

char *ec_config_dump(const ec_config_t *cfg)
{
    char *buf = NULL;
    size_t len = 0;
    if (!cfg || !cfg->cmd)
        return NULL;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    for (int i = 0; i < EC_K__COUNT; i++) {
        const ec_knob_t *k = &ec__knobs[i];
        if (!(k->cmds & cfg->cmd))
            continue;
        char v[1024];
        fmt_value(cfg, k, v, sizeof(v));
        const ec_source_t *s = &cfg->src[i];
        switch (s->kind) {
        case EC_SRC_FLAG:
            fprintf(f, "%s: %s (source: flag --%s)\n", k->name, v, s->name);
            break;
        case EC_SRC_ENV:
            fprintf(f, "%s: %s (source: env %s)\n", k->name, v, s->name);
            break;
        case EC_SRC_FILE:
            fprintf(f, "%s: %s (source: file %s)\n", k->name, v, s->name);
            break;
        default:
            if (s->name)
                fprintf(f, "%s: %s (source: default: %s)\n", k->name, v, s->name);
            else
                fprintf(f, "%s: %s (source: default)\n", k->name, v);
        }
    }
    if (cfg->cmd == EC_CMD_LAUNCH && cfg->prog_argc > 0) {
        fprintf(f, "program:");
        for (int i = 0; i < cfg->prog_argc; i++) {
            const char *a = cfg->prog_argv[i];
            if (*a && !strpbrk(a, " \t\n'\"\\$`"))
                fprintf(f, " %s", a);
            else { /* shell-quote, so the line can be pasted back */
                fputs(" '", f);
                for (; *a; a++)
                    *a == '\'' ? fputs("'\\''", f) : fputc(*a, f);
                fputc('\'', f);
            }
        }
        fputc('\n', f);
    }
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}
