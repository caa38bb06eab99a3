/* The proof in a probe's answer (probe_proof.h). */
#include "probe_proof.h"

#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "keys.h"

#define MAC_LEN 32
#define DOMAIN "ecoord-probe-1" /* and its NUL: a proof of nothing else */

static const char hexd[] = "0123456789abcdef";

static int mac_of(const uint8_t *secret, const uint8_t *nonce, const char *id, int64_t lease,
                  uint8_t *mac)
{
    uint8_t msg[sizeof(DOMAIN) + EC_PROBE_NONCE_LEN + 8 + EC_NODE_ID_MAX];
    size_t il = strlen(id), k = 0;
    if (il == 0 || il > EC_NODE_ID_MAX)
        return -1;
    memcpy(msg, DOMAIN, sizeof(DOMAIN));
    k += sizeof(DOMAIN);
    memcpy(msg + k, nonce, EC_PROBE_NONCE_LEN);
    k += EC_PROBE_NONCE_LEN;
    for (int i = 7; i >= 0; i--)
        msg[k++] = (uint8_t)((uint64_t)lease >> (8 * i));
    memcpy(msg + k, id, il); /* last: its length is the rest */
    k += il;
    unsigned int ml = 0;
    if (!HMAC(EVP_sha256(), secret, EC_PROBE_SECRET_LEN, msg, k, mac, &ml) || ml != MAC_LEN)
        return -1;
    return 0;
}

int ec_probe_answer_make(const uint8_t *secret, const uint8_t *nonce, const char *node_id,
                         int64_t lease, char *buf, size_t len)
{
    uint8_t mac[MAC_LEN];
    if (mac_of(secret, nonce, node_id, lease, mac) < 0)
        return -1;
    char hex[2 * MAC_LEN + 1];
    for (int i = 0; i < MAC_LEN; i++) {
        hex[2 * i] = hexd[mac[i] >> 4];
        hex[2 * i + 1] = hexd[mac[i] & 15];
    }
    hex[2 * MAC_LEN] = '\0';
    int n = snprintf(buf, len, "ecoord %s %016llx %s\n", node_id, (unsigned long long)lease, hex);
    return n < 0 || (size_t)n >= len ? -1 : n;
}

int ec_probe_answer_check(const uint8_t *secret, const uint8_t *nonce, const char *expect_id,
                          int64_t expect_lease, const char *line, size_t len)
{
    /* "ecoord " id " " 16 hex " " 64 hex "\n" */
    size_t il = strlen(expect_id);
    size_t want = 7 + il + 1 + 16 + 1 + 2 * MAC_LEN + 1;
    if (len != want || strncmp(line, "ecoord ", 7) || strncmp(line + 7, expect_id, il) ||
        line[7 + il] != ' ' || line[7 + il + 17] != ' ' || line[len - 1] != '\n')
        return 0;
    const char *lh = line + 7 + il + 1;
    uint64_t lease = 0;
    for (int i = 0; i < 16; i++) {
        const char *d = strchr(hexd, lh[i]);
        if (!d || !lh[i])
            return 0;
        lease = lease << 4 | (uint64_t)(d - hexd);
    }
    if (expect_lease && (int64_t)lease != expect_lease)
        return 0;
    char mine[EC_PROBE_ANSWER_MAX + 1];
    int n = ec_probe_answer_make(secret, nonce, expect_id, (int64_t)lease, mine, sizeof(mine));
    if (n < 0 || (size_t)n != len)
        return 0;
    return CRYPTO_memcmp(mine, line, len) == 0;
}

static int key_check(const ec_probe_verifier_t *v, const uint8_t *nonce, const char *expect_id,
                     int64_t expect_lease, const char *line, size_t len)
{
    const ec_probe_key_t *k = (const ec_probe_key_t *)v;
    return ec_probe_answer_check(k->secret, nonce, expect_id, expect_lease, line, len);
}

void ec_probe_key_init(ec_probe_key_t *k, const uint8_t *secret)
{
    k->v.check = key_check;
    memcpy(k->secret, secret, EC_PROBE_SECRET_LEN);
}
