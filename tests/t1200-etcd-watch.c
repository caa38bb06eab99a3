#include "harness.h"
static Suite *suite(void){return suite_create("x");}
EC_INTEGRATION_MAIN(suite)
