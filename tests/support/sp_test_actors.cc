#include "support/sp_test_actors.h"

#include <unistd.h>

#include <thread>

namespace testing_actors {

SpReport SpSummer::run(spotlight::TaskContext& ctx, int64_t steps, int64_t step_ms) {
  spotlight::collective::Communicator& comm = sp_.communicator(ctx);
  const spotlight::SpGroup& g = *ctx.group();
  SpProgress p = ctx.resume_value<SpProgress>().value_or(SpProgress{});
  SpReport r;
  r.started_at = p.step;
  while (p.step < steps) {
    std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));  // the step's work
    int64_t v = (p.step + 1) * (comm.rank() + 1);
    comm.all_reduce(&v, 1, spotlight::collective::DataType::kInt64, spotlight::collective::ReduceOp::kSum);
    p.total += v;
    p.step += 1;
    ctx.commit_value(p);
    ++steps_run_;
    if (p.step < steps && sp_.should_yield(ctx)) ctx.yield();  // the whole group, after the same step
  }
  r.total = p.total;
  r.resumed = ctx.resumed();
  r.attempt = ctx.attempt();
  r.epoch = g.epoch;
  r.group = g.name;
  r.members = g.members;
  r.pid = ::getpid();
  r.formations = sp_.formations();
  r.steps_run = steps_run_;
  return r;
}

}  // namespace testing_actors

SPOTLIGHT_ACTOR(testing_actors::SpSummer, run)
