/* Gathering a node's facts (see gather.h): identity, network, devices,
 * memory, environment.  The check's only reader of /proc, /sys, the driver
 * libraries and the environment; it publishes nothing (command_publish.c does). */
#define _GNU_SOURCE
#include "gather.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "endpoints.h"
#include "netaddr.h"
#include "rules.h"

extern char **environ;

#define RESOLVE_MS 2000     /* a host name lookup */
#define ENV_VALUE_MAX 1024  /* longer values of published variables are cut */

/* ------------------------------------------------------------------------ */
/* gathering: identity and network                                           */

static void read_line_file(const char *path, char *buf, size_t len)
{
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    if (fgets(buf, (int)len, f))
        buf[strcspn(buf, "\n")] = '\0';
    fclose(f);
}

static void make_nonce(char *buf)
{
    unsigned char r[EC_CHECK_NONCE_LEN / 2];
    if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
        uint64_t x = (uint64_t)ec_wall_us() ^ ((uint64_t)getpid() << 32);
        memcpy(r, &x, sizeof(r) < sizeof(x) ? sizeof(r) : sizeof(x));
    }
    for (size_t i = 0; i < sizeof(r); i++)
        sprintf(buf + 2 * i, "%02x", r[i]);
}

/* Resolve host (numeric or a name) with a deadline: getaddrinfo itself has
 * none, and a dead DNS server would stall the whole check.  Returns 0 and
 * the first address, or -1 with why filled. */
int ec_check_resolve(const char *host, int port, int socktype, struct sockaddr_storage *ss,
                            socklen_t *sl, char *why, size_t whylen)
{
    char ps[16];
    snprintf(ps, sizeof(ps), "%d", port);
    struct addrinfo hints = {.ai_socktype = socktype, .ai_flags = AI_NUMERICHOST}, *res = NULL;
    if (getaddrinfo(host, ps, &hints, &res) == 0 && res) {
        memcpy(ss, res->ai_addr, res->ai_addrlen);
        *sl = res->ai_addrlen;
        freeaddrinfo(res);
        return 0;
    }
    /* A name: ask asynchronously and give up at the deadline.  The request
     * block is leaked on purpose when it cannot be cancelled (the resolver
     * thread still owns it). */
    struct gaicb *g = calloc(1, sizeof(*g));
    struct addrinfo *h = calloc(1, sizeof(*h));
    char *name = strdup(host), *service = strdup(ps);
    if (!g || !h || !name || !service) {
        free(g);
        free(h);
        free(name);
        free(service);
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    h->ai_socktype = socktype;
    g->ar_name = name;
    g->ar_service = service;
    g->ar_request = h;
    struct gaicb *list[1] = {g};
    if (getaddrinfo_a(GAI_NOWAIT, list, 1, NULL) != 0) {
        snprintf(why, whylen, "cannot resolve %s", host);
        free(g);
        free(h);
        free(name);
        free(service);
        return -1;
    }
    struct timespec ts = {RESOLVE_MS / 1000, (RESOLVE_MS % 1000) * 1000000L};
    gai_suspend((const struct gaicb *const *)list, 1, &ts);
    int rc = gai_error(g);
    if (rc == EAI_INPROGRESS) {
        if (gai_cancel(g) != EAI_CANCELED) {
            snprintf(why, whylen, "resolving %s took longer than %d ms", host, RESOLVE_MS);
            return -1; /* leaked: still in use by the resolver */
        }
        rc = EAI_CANCELED;
    }
    int out = -1;
    if (rc == 0 && g->ar_result) {
        memcpy(ss, g->ar_result->ai_addr, g->ar_result->ai_addrlen);
        *sl = g->ar_result->ai_addrlen;
        out = 0;
    } else {
        snprintf(why, whylen, "cannot resolve %s: %s", host,
                 rc == EAI_CANCELED ? "timed out" : gai_strerror(rc));
    }
    if (g->ar_result)
        freeaddrinfo(g->ar_result);
    free(g);
    free(h);
    free(name);
    free(service);
    return out;
}

void ec_check_addr_string(const struct sockaddr_storage *ss, char *buf, size_t len)
{
    buf[0] = '\0';
    if (ss->ss_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)ss)->sin_addr, buf, (socklen_t)len);
    else if (ss->ss_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)ss)->sin6_addr, buf, (socklen_t)len);
}

static int gather_ifaces(ec_check_facts_t *f)
{
    struct ifaddrs *ifa = NULL;
    if (getifaddrs(&ifa) < 0)
        return 0;
    int rc = 0;
    for (struct ifaddrs *i = ifa; i && rc == 0 && f->nifaces < 128; i = i->ifa_next) {
        if (!i->ifa_addr ||
            (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6))
            continue;
        char a[64];
        ec_check_addr_string((const struct sockaddr_storage *)(void *)i->ifa_addr, a, sizeof(a));
        rc = ec_check_facts_add_iface(f, i->ifa_name, a,
                                      (i->ifa_flags & IFF_UP) && (i->ifa_flags & IFF_RUNNING));
    }
    freeifaddrs(ifa);
    return rc;
}

/* The address this node publishes, as `ecoord launch` chooses it. */
static void gather_address(const ec_check_gather_in_t *x, ec_check_facts_t *f)
{
    ec_error_t err = {0};
    if (*x->cfg->host) {
        snprintf(f->host, sizeof(f->host), "%s", x->cfg->host);
        f->host_given = 1;
        ec_addr_ifname(f->host, f->ifname, sizeof(f->ifname));
        struct sockaddr_storage ss;
        socklen_t sl;
        char why[160], a[64];
        if (!f->ifname[0] &&
            ec_check_resolve(f->host, 0, SOCK_STREAM, &ss, &sl, why, sizeof(why)) == 0) {
            ec_check_addr_string(&ss, a, sizeof(a)); /* a name: its address's interface */
            ec_addr_ifname(a, f->ifname, sizeof(f->ifname));
        }
        return;
    }
    ec__endpoints_t eps;
    if (ec__endpoints_parse(x->endpoints, &eps, &err) < 0 ||
        ec_route_addr(eps.ep[0].host, eps.ep[0].port, f->host, sizeof(f->host), f->ifname,
                      sizeof(f->ifname), &err) < 0) {
        snprintf(f->host, sizeof(f->host), "127.0.0.1");
        snprintf(f->ports_err, sizeof(f->ports_err), "%s", err.msg);
    }
}

/* ------------------------------------------------------------------------ */
/* gathering: devices, through the driver's own libraries (dlopen: ecoord
 * neither links nor needs CUDA; a machine without it gets the reason).      */

typedef int (*cu_init_fn)(unsigned);
typedef int (*cu_int_fn)(int *);
typedef int (*cu_get_fn)(int *, int);
typedef int (*cu_busid_fn)(char *, int, int);
typedef int (*cu_errstr_fn)(int, const char **);

typedef void *nvml_dev_t;
typedef struct {
    unsigned long long total, free, used;
} nvml_mem_t;
typedef struct { /* nvmlProcessInfo_t of the _v2/_v3 calls */
    unsigned int pid;
    unsigned long long used;
    unsigned int gi, ci;
} nvml_proc_t;
typedef int (*nvml_void_fn)(void);
typedef int (*nvml_str_fn)(char *, unsigned);
typedef int (*nvml_bybus_fn)(const char *, nvml_dev_t *);
typedef int (*nvml_name_fn)(nvml_dev_t, char *, unsigned);
typedef int (*nvml_mem_fn)(nvml_dev_t, nvml_mem_t *);
typedef int (*nvml_procs_fn)(nvml_dev_t, unsigned *, nvml_proc_t *);
typedef int (*nvml_p2p_fn)(nvml_dev_t, nvml_dev_t, int, int *);

static void *open_first(const char *const *names, char *path, size_t plen, void **sym,
                        const char *symname)
{
    for (int i = 0; names[i]; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (!h)
            continue;
        void *s = dlsym(h, symname);
        if (!s) {
            dlclose(h);
            continue;
        }
        Dl_info info;
        if (path && dladdr(s, &info) && info.dli_fname)
            snprintf(path, plen, "%s", info.dli_fname);
        *sym = s;
        return h;
    }
    return NULL;
}

/* "0000:3b:00.0" from "00000000:3B:00.0" or "0000:3b:00.0". */
static void norm_bus_id(const char *in, char *out, size_t len)
{
    unsigned d, b, dv, fn;
    if (sscanf(in, "%x:%x:%x.%x", &d, &b, &dv, &fn) == 4)
        snprintf(out, len, "%04x:%02x:%02x.%x", d, b, dv, fn);
    else
        snprintf(out, len, "%s", in);
}

static const char *p2p_status_name(int s)
{
    switch (s) {
    case 1:
        return "chipset not supported";
    case 2:
        return "GPU not supported";
    case 3:
        return "PCIe topology not supported";
    case 4:
        return "disabled by the driver (regkey)";
    case 5:
        return "not supported";
    default:
        return "unknown";
    }
}

/* The GPU libraries gather_gpus loaded and what it looked up in them. */
typedef struct {
    int cvd_ids[1024]; /* CUDA_VISIBLE_DEVICES, parsed */
    int ncvd;
    void *hcu;         /* libcuda, kept loaded (unloading it after cuInit is not supported) */
    int cu_rc;         /* cuInit's result; -1 without libcuda */
    cu_get_fn cuget;   /* these with cuInit done */
    cu_busid_fn cubus;
    void *hnv;         /* libnvidia-ml */
    bool nv;           /* NVML initialised */
    nvml_bybus_fn bybus; /* these with NVML initialised */
    nvml_name_fn nname;
    nvml_mem_fn nmem;
    nvml_procs_fn nprocs;
} gpu_probe_t;

/* CUDA_VISIBLE_DEVICES and --gpus, as the job would see them. */
static void gather_gpu_config(const ec_check_gather_in_t *x, ec_check_facts_t *f, gpu_probe_t *pr)
{
    const ec_config_t *cfg = x->cfg;
    const char *cvd = x->env("CUDA_VISIBLE_DEVICES", x->env_arg);
    if (cvd) {
        f->cvd_set = 1;
        snprintf(f->cvd, sizeof(f->cvd), "%s", cvd);
        pr->ncvd = f->cvd_count = ec_check_cvd_parse(cvd, pr->cvd_ids, 1024);
    }
    for (int i = 0; i < cfg->gpus.n; i++) {
        int *e = realloc(f->gpus_flag, (size_t)(f->ngpus_flag + 1) * sizeof(int));
        if (!e)
            break;
        f->gpus_flag = e;
        f->gpus_flag[f->ngpus_flag++] = cfg->gpus.v[i];
    }
    f->visible = -1;
}

/* The CUDA driver: presence, version, visible devices. */
static void probe_cuda(ec_check_facts_t *f, gpu_probe_t *pr)
{
    void *cu_init = NULL;
    char cu_path[PATH_MAX] = "";
    static const char *const cuda_libs[] = {"libcuda.so.1", "libcuda.so", NULL};
    void *hcu = pr->hcu = open_first(cuda_libs, cu_path, sizeof(cu_path), &cu_init, "cuInit");
    cu_errstr_fn errstr = hcu ? (cu_errstr_fn)dlsym(hcu, "cuGetErrorString") : NULL;
    pr->cu_rc = -1;
    if (!hcu) {
        snprintf(f->driver_why, sizeof(f->driver_why),
                 "no NVIDIA driver: libcuda.so.1 cannot be loaded");
        return;
    }
    int cu_rc = pr->cu_rc = ((cu_init_fn)cu_init)(0);
    if (cu_rc == 0) {
        f->driver = 1;
        cu_int_fn ver = (cu_int_fn)dlsym(hcu, "cuDriverGetVersion");
        cu_int_fn cnt = (cu_int_fn)dlsym(hcu, "cuDeviceGetCount");
        if (ver)
            ver(&f->cuda_driver_version);
        if (cnt && cnt(&f->visible) != 0)
            f->visible = -1;
        pr->cuget = (cu_get_fn)dlsym(hcu, "cuDeviceGet");
        pr->cubus = (cu_busid_fn)dlsym(hcu, "cuDeviceGetPCIBusId");
        return;
    }
    const char *s = NULL;
    if (errstr)
        errstr(cu_rc, &s);
    if (cu_rc == 34) /* CUDA_ERROR_STUB_LIBRARY */
        snprintf(f->driver_why, sizeof(f->driver_why), "%s is CUDA's stub library, not "
                 "the driver (a stubs directory in LD_LIBRARY_PATH?)", cu_path);
    else
        snprintf(f->driver_why, sizeof(f->driver_why), "cuInit failed: %s (CUDA error %d)",
                 s ? s : "unknown error", cu_rc);
    if (cu_rc == 100) /* CUDA_ERROR_NO_DEVICE: a driver, no device visible */
        f->visible = 0;
}

/* NVML: driver version, who else runs on our GPUs, peer-to-peer. */
static void probe_nvml(ec_check_facts_t *f, gpu_probe_t *pr)
{
    void *nvml_init = NULL;
    static const char *const nvml_libs[] = {"libnvidia-ml.so.1", "libnvidia-ml.so", NULL};
    void *hnv = pr->hnv = open_first(nvml_libs, NULL, 0, &nvml_init, "nvmlInit_v2");
    pr->nv = hnv && ((nvml_void_fn)nvml_init)() == 0;
    if (!pr->nv) {
        if (f->driver) {
            char v[256];
            read_line_file("/proc/driver/nvidia/version", v, sizeof(v));
            const char *m = strstr(v, "Kernel Module");
            if (m && sscanf(m + 13, " %31s", f->driver_version) != 1)
                f->driver_version[0] = '\0';
        }
        return;
    }
    nvml_str_fn dv = (nvml_str_fn)dlsym(hnv, "nvmlSystemGetDriverVersion");
    if (dv)
        dv(f->driver_version, sizeof(f->driver_version));
    if (pr->cu_rc == 100) {
        f->driver = 1; /* the driver runs; CUDA_VISIBLE_DEVICES hides the devices */
        f->driver_why[0] = '\0';
    }
    pr->bybus = (nvml_bybus_fn)dlsym(hnv, "nvmlDeviceGetHandleByPciBusId_v2");
    pr->nname = (nvml_name_fn)dlsym(hnv, "nvmlDeviceGetName");
    pr->nmem = (nvml_mem_fn)dlsym(hnv, "nvmlDeviceGetMemoryInfo");
    pr->nprocs = (nvml_procs_fn)dlsym(hnv, "nvmlDeviceGetComputeRunningProcesses_v3");
    if (!pr->nprocs)
        pr->nprocs = (nvml_procs_fn)dlsym(hnv, "nvmlDeviceGetComputeRunningProcesses_v2");
}

/* Rank r's GPU: --gpus (physical ids), else the CUDA_VISIBLE_DEVICES entry,
 * else the rank itself.  False when CUDA_VISIBLE_DEVICES has none for it
 * (the gpu-count check says so). */
static bool rank_gpu_ids(const ec_config_t *cfg, const ec_check_facts_t *f, const gpu_probe_t *pr,
                         int r, ec_check_gpu_t *g)
{
    *g = (ec_check_gpu_t){.rank = r, .ordinal = r, .physical = r, .mem_used_mib = -1,
                          .mem_total_mib = -1};
    if (cfg->gpus.n > r) {
        g->physical = cfg->gpus.v[r];
        g->ordinal = g->physical;
        if (f->cvd_set) {
            g->ordinal = -1;
            for (int k = 0; k < pr->ncvd && k < 1024; k++)
                if (pr->cvd_ids[k] == g->physical)
                    g->ordinal = k;
        }
    } else if (f->cvd_set) {
        if (r >= pr->ncvd)
            return false;
        g->physical = r < 1024 ? pr->cvd_ids[r] : -1;
    }
    return true;
}

/* The GPU's PCI bus id (CUDA) and its NVML handle (NULL if none). */
static nvml_dev_t rank_gpu_handle(const ec_check_facts_t *f, const gpu_probe_t *pr,
                                  ec_check_gpu_t *g)
{
    nvml_dev_t h = NULL;
    if (pr->cuget && pr->cubus && g->ordinal >= 0 && g->ordinal < f->visible) {
        int dev;
        char bus[64];
        if (pr->cuget(&dev, g->ordinal) == 0 && pr->cubus(bus, sizeof(bus), dev) == 0) {
            norm_bus_id(bus, g->bus_id, sizeof(g->bus_id));
            if (pr->bybus && pr->bybus(bus, &h) != 0)
                h = NULL;
        }
    }
    return h;
}

/* What NVML says of the GPU: name, memory, the other processes on it. */
static void rank_gpu_nvml(const gpu_probe_t *pr, nvml_dev_t h, ec_check_gpu_t *g)
{
    if (pr->nname)
        pr->nname(h, g->name, sizeof(g->name));
    nvml_mem_t mem;
    if (pr->nmem && pr->nmem(h, &mem) == 0) {
        g->mem_used_mib = (long long)(mem.used >> 20);
        g->mem_total_mib = (long long)(mem.total >> 20);
    }
    nvml_proc_t procs[32];
    unsigned np = 32;
    if (!pr->nprocs || pr->nprocs(h, &np, procs) != 0)
        return;
    size_t used = 0;
    for (unsigned k = 0; k < np && k < 32; k++) {
        if ((pid_t)procs[k].pid == getpid())
            continue;
        g->nprocs++;
        if (used + 48 < sizeof(g->procs))
            used += (size_t)snprintf(g->procs + used, sizeof(g->procs) - used,
                                     "%spid %u (%llu MiB)", used ? ", " : "", procs[k].pid,
                                     procs[k].used >> 20);
    }
}

/* Peer-to-peer reads between every two ranks' GPUs, as NVML reports them. */
static void gather_p2p(const gpu_probe_t *pr, ec_check_facts_t *f, const nvml_dev_t *handles,
                       int nh)
{
    nvml_p2p_fn p2p = pr->nv ? (nvml_p2p_fn)dlsym(pr->hnv, "nvmlDeviceGetP2PStatus") : NULL;
    for (int a = 0; p2p && a < nh; a++)
        for (int b = a + 1; b < nh; b++) {
            if (!handles[a] || !handles[b] || handles[a] == handles[b])
                continue;
            int st = 6;
            if (p2p(handles[a], handles[b], 0 /* NVML_P2P_CAPS_INDEX_READ */, &st) != 0)
                continue;
            ec_check_p2p_t e = {.a = a, .b = b, .ok = st == 0};
            snprintf(e.status, sizeof(e.status), "%s", st == 0 ? "ok" : p2p_status_name(st));
            ec_check_facts_add_p2p(f, &e);
        }
}

/* The CUDA runtime and NCCL training would load (same library path). */
static void probe_runtime_libs(ec_check_facts_t *f)
{
    void *sym = NULL;
    static const char *const rt_libs[] = {"libcudart.so", "libcudart.so.13", "libcudart.so.12",
                                          "libcudart.so.11.0", NULL};
    void *hrt = open_first(rt_libs, f->cudart_path, sizeof(f->cudart_path), &sym,
                           "cudaRuntimeGetVersion");
    if (hrt) {
        if (((cu_int_fn)sym)(&f->cudart_version) != 0)
            f->cudart_version = 0;
        dlclose(hrt);
    }
    static const char *const nccl_libs[] = {"libnccl.so.2", "libnccl.so", NULL};
    void *hnc = open_first(nccl_libs, f->nccl_path, sizeof(f->nccl_path), &sym, "ncclGetVersion");
    if (hnc) {
        int code = 0;
        if (((cu_int_fn)sym)(&code) == 0)
            f->nccl_version = ec_check_nccl_version_norm(code);
        dlclose(hnc);
    }
}

/* The GPUs of the local ranks, their driver and the libraries training
 * loads: what the gpu rules judge. */
static void gather_gpus(const ec_check_gather_in_t *x, ec_check_facts_t *f)
{
    const ec_config_t *cfg = x->cfg;
    gpu_probe_t pr = {.ncvd = 0};
    gather_gpu_config(x, f, &pr);
    probe_cuda(f, &pr);
    probe_nvml(f, &pr);

    /* the GPU of every local rank */
    bool assigned = f->driver || pr.ncvd > 0 || cfg->gpus.n > 0;
    nvml_dev_t handles[1024];
    int nh = 0;
    for (int r = 0; assigned && r < cfg->nproc_per_node && r < 1024; r++) {
        ec_check_gpu_t g;
        if (!rank_gpu_ids(cfg, f, &pr, r, &g))
            break;
        nvml_dev_t h = rank_gpu_handle(f, &pr, &g);
        if (h)
            rank_gpu_nvml(&pr, h, &g);
        handles[nh++] = h;
        ec_check_facts_add_gpu(f, &g);
    }
    gather_p2p(&pr, f, handles, nh);
    if (pr.nv) {
        nvml_void_fn shut = (nvml_void_fn)dlsym(pr.hnv, "nvmlShutdown");
        if (shut)
            shut();
    }
    if (pr.hnv)
        dlclose(pr.hnv);
    /* libcuda stays loaded: unloading it after cuInit is not supported. */
    probe_runtime_libs(f);
}

/* ------------------------------------------------------------------------ */
/* gathering: memory and environment                                         */

static void gather_memory(ec_check_facts_t *f)
{
    snprintf(f->shm_path, sizeof(f->shm_path), "/dev/shm");
    struct statvfs sv;
    if (statvfs(f->shm_path, &sv) == 0) {
        f->shm_bytes = (long long)sv.f_blocks * (long long)sv.f_frsize;
        f->shm_free = (long long)sv.f_bavail * (long long)sv.f_frsize;
    } else {
        f->shm_bytes = f->shm_free = -1;
        snprintf(f->shm_err, sizeof(f->shm_err), "%s", strerror(errno));
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0)
        f->memlock_cur = rl.rlim_cur == RLIM_INFINITY ? -1 : (long long)rl.rlim_cur;
    DIR *d = opendir("/sys/class/infiniband");
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)))
            if (e->d_name[0] != '.')
                f->nib++;
        closedir(d);
    }
}

static int env_published(const char *name)
{
    static const char *const prefixes[] = {"NCCL_", "CUDA_", "GLOO_", "TORCH_NCCL_",
                                           "TORCH_DISTRIBUTED_", "UCX_", "FI_", NULL};
    static const char *const exact[] = {"LD_LIBRARY_PATH", "LD_PRELOAD", "PYTHONPATH",
                                        "PYTHONHOME", "OMP_NUM_THREADS", NULL};
    static const char *const per_machine[] = {"CUDA_VISIBLE_DEVICES", "NCCL_HOSTID", NULL};
    for (int i = 0; per_machine[i]; i++)
        if (!strcmp(name, per_machine[i]))
            return 0;
    for (int i = 0; exact[i]; i++)
        if (!strcmp(name, exact[i]))
            return 1;
    for (int i = 0; prefixes[i]; i++)
        if (!strncmp(name, prefixes[i], strlen(prefixes[i])))
            return 1;
    return 0;
}

static int cmp_env(const void *a, const void *b)
{
    return strcmp(((const ec_check_env_t *)a)->name, ((const ec_check_env_t *)b)->name);
}

static void gather_env(const ec_check_gather_in_t *x, ec_check_facts_t *f)
{
    for (char **e = environ; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq || eq == *e || eq - *e >= 128)
            continue;
        char name[128];
        memcpy(name, *e, (size_t)(eq - *e));
        name[eq - *e] = '\0';
        if (!env_published(name))
            continue;
        char value[ENV_VALUE_MAX + 1];
        snprintf(value, sizeof(value), "%s", eq + 1);
        ec_check_facts_add_env(f, name, value);
    }
    if (f->nenv > 1)
        qsort(f->env, (size_t)f->nenv, sizeof(f->env[0]), cmp_env);
    const char *hid = x->env("NCCL_HOSTID", x->env_arg);
    if (hid)
        snprintf(f->host_id, sizeof(f->host_id), "%s", hid);
}

void ec_check_find_coll_prog(ec_getenv_fn env, void *env_arg, char *path, size_t len, char *why,
                             size_t wlen)
{
    path[0] = '\0';
    const char *p = env("ECOORD_CHECK_ALLREDUCE", env_arg);
    if (p && *p) {
        if (access(p, X_OK) == 0)
            snprintf(path, len, "%s", p);
        else
            snprintf(why, wlen, "ECOORD_CHECK_ALLREDUCE=%s is not an executable program", p);
        return;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0) {
        snprintf(why, wlen, "cannot find the ecoord binary's directory");
        return;
    }
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = '\0';
    char cand[PATH_MAX + 32];
    snprintf(cand, sizeof(cand), "%s/ecoord-allreduce", exe);
    if (access(cand, X_OK) == 0)
        snprintf(path, len, "%s", cand);
    else
        snprintf(why, wlen, "the worker library's allreduce program is not installed (looked for "
                            "%s and $ECOORD_CHECK_ALLREDUCE); build worker/ to run it", cand);
}

void ec_check_gather(const ec_check_gather_in_t *x, ec_check_facts_t *f)
{
    f->version = EC_CHECK_FACTS_VERSION;
    f->phase = EC_CHECK_PHASE_LOCAL;
    snprintf(f->node_id, sizeof(f->node_id), "%s", x->cfg->node_id);
    make_nonce(f->nonce);
    gethostname(f->hostname, sizeof(f->hostname) - 1);
    read_line_file("/proc/sys/kernel/random/boot_id", f->boot_id, sizeof(f->boot_id));
    f->pid = (int)getpid();
    ssize_t nl = readlink("/proc/self/ns/pid", f->pidns, sizeof(f->pidns) - 1);
    f->pidns[nl > 0 ? nl : 0] = '\0';
    f->wall_ms = ec_wall_ms();
    f->nproc = x->cfg->nproc_per_node;
    snprintf(f->etcd, sizeof(f->etcd), "%s", x->endpoints ? x->endpoints : "");
    struct sockaddr_storage ss;
    socklen_t sl;
    char why[160];
    if (ec_check_resolve(f->hostname, 0, SOCK_STREAM, &ss, &sl, why, sizeof(why)) == 0)
        ec_check_addr_string(&ss, f->hostname_addr, sizeof(f->hostname_addr));
    gather_ifaces(f);
    gather_gpus(x, f);
    gather_memory(f);
    gather_env(x, f);
    char prog[PATH_MAX];
    ec_check_find_coll_prog(x->env, x->env_arg, prog, sizeof(prog), why, sizeof(why));
    f->coll_prog = prog[0] != '\0';
    gather_address(x, f);
}

