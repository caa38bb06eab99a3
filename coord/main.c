/* ecoord: one binary, subcommands dispatched here. */
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "version")) {
        printf("ecoord 0.1.0\n");
        return 0;
    }
    fprintf(stderr, "usage: ecoord version\n");
    return 2;
}
