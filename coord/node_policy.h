/* The node coordinator's decisions that need no etcd: pure functions of what
 * the coordinator knows, unit-tested in coord/test/test_node_policy.c. */
#ifndef EC_NODE_POLICY_H
#define EC_NODE_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#endif
