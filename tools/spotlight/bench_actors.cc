#include "tools/spotlight/bench_actors.h"

#include "spotlight/actor.h"

SPOTLIGHT_ACTOR(spotlight::bench::Echo, ping)
