#ifndef LOGSYNC_CLMDB_SHIM_H
#define LOGSYNC_CLMDB_SHIM_H

#include <lmdb.h>

#endif
