/* version.c - the library version. */
#include "hearth.h"

const char *hearth_version(void) { return HEARTH_VERSION; }
