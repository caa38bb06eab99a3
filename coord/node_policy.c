/* Pure decisions of the node coordinator (see node_policy.h). */
#include "node_policy.h"
