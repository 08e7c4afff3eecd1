// spotlight-sp-bench (run as `spotlight bench sp`): how fast a sequence-
// parallel group of the DiT re-forms after a member is killed, phase by
// phase, against restarting the group, measured in one run.
//
// One `spotlight head` serves the rendezvous KV. For each degree d, d member
// processes load the shipped checkpoint, form epoch 1 and run SP forward
// steps in a loop; one standby process (no weights) waits. The bench kills
// member 1 with SIGKILL and announces the new membership (the survivors and
// the standby) in the head's KV itself: these processes are not actors, so
// the head's SP-group manager (runtime/head/sp_groups.cc, which needs one
// probe round trip more) does not see them. Each member stamps CLOCK_MONOTONIC (one clock for
// every process of this machine) as it passes each phase:
//   detection      the survivor's collective fails (the killed peer's sockets close)
//   agreement      it reads the new membership from the head's KV
//   communicator   the Gloo communicator of epoch 2 is built
//   weights        the standby has the weights, sent by a survivor (rank 0)
//   first step     the first SP forward of epoch 2 is done
// Then the restart baseline: stop the group's processes, start d new ones
// that load the checkpoint from its file, build a communicator and run one
// step. The broken communicator is retired on a background thread at once
// (collective::retire), the unused prepared ones after the new group's
// first step: closing them is off the re-forming member's path.
//
// With --rollout it checks correctness instead: a seeded SP rollout killed
// after step 3 resumes in the re-formed group and must finish with the same
// bits as an undisturbed run of the same seeds.
#include <signal.h>
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <sstream>

#include "common/process.h"
#include "models/checkpoint.h"
#include "models/dit.h"
#include "models/sampler.h"
#include "spotlight/collective.h"
#include "spotlight/head_kv.h"
#include "spotlight/spotlight.h"
#include "tools/common/omp_env.h"
#include "transport/cluster_key.h"

using namespace spotlight;
using namespace std::chrono_literals;

namespace {

int64_t mono_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

std::string key(const std::string& run, const std::string& what) { return "spbench/" + run + "/" + what; }

std::vector<int> parse_ints(const std::string& s) {
  std::vector<int> v;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) v.push_back(std::stoi(item));
  return v;
}

// A fixed batch every member steps on: 2 images of the tiny model.
struct Batch {
  torch::Tensor x, s, tokens;
};
Batch fixed_batch(const models::DiTConfig& cfg) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
  return {torch::randn({2, cfg.channels, cfg.image_size, cfg.image_size}, gen), torch::tensor({0.8f, 0.3f}),
          torch::randint(2, 20, {2, cfg.text_len}, gen, torch::kInt64)};
}

void sp_step(models::DiT& model, collective::Communicator& comm, const Batch& b) {
  torch::NoGradGuard no_grad;
  models::SequenceParallel sp{&comm};
  model->forward(b.x, b.s, b.tokens, &sp);
}

// Every parameter and buffer, in order, as one flat float buffer: what a
// sibling copies to a member that has no weights.
torch::Tensor flat_weights(models::DiT& model) {
  std::vector<torch::Tensor> parts;
  for (auto& p : model->parameters()) parts.push_back(p.detach().reshape({-1}));
  return torch::cat(parts);
}

void load_flat_weights(models::DiT& model, const torch::Tensor& flat) {
  torch::NoGradGuard no_grad;
  int64_t off = 0;
  for (auto& p : model->parameters()) {
    p.copy_(flat.narrow(0, off, p.numel()).view(p.sizes()));
    off += p.numel();
  }
}

struct MemberArgs {
  std::string head, run, checkpoint;
  int slot = 0, degree = 2;
  bool standby = false, restart = false, rollout = false;
  bool fresh = false;  // no communicators prepared ahead: re-form through a new rendezvous
};

// The membership that re-forms when `victim` dies: the other slots in order,
// then the standby (-1).
std::vector<int> without(int degree, int victim) {
  std::vector<int> slots;
  for (int s = 0; s < degree; ++s)
    if (s != victim) slots.push_back(s);
  slots.push_back(-1);
  return slots;
}

// Communicators for every single failure, built while the group is whole
// (Gloo cannot shrink a context as NCCL's ncclCommShrink does): the one for
// the member that dies is ready when it dies. Each is a full mesh of its own;
// every process builds them in order of the victim, so they never wait on
// each other in a cycle. `warm` runs once on each (an SP step), so that
// its pairs and every member's SP path have run before they are needed.
std::map<int, std::unique_ptr<collective::Communicator>> prepare_communicators(
    collective::KvStore& kv, const MemberArgs& a, const collective::GlooOptions& go,
    const std::function<void(collective::Communicator&)>& warm) {
  std::map<int, std::unique_ptr<collective::Communicator>> out;
  const int me = a.standby ? -1 : a.slot;
  for (int v = 0; v < a.degree; ++v) {
    if (v == me) continue;
    const auto slots = without(a.degree, v);
    const int rank = int(std::find(slots.begin(), slots.end(), me) - slots.begin());
    out[v] = collective::make_gloo_communicator(kv, a.run + "/without-" + std::to_string(v), 2, rank, a.degree, go);
    warm(*out[v]);
  }
  return out;
}

// Joins epoch 2 from the announced membership ("slot,slot,...,-1": slots in
// rank order, -1 the standby).
std::unique_ptr<collective::Communicator> join_epoch_two(collective::KvStore& kv, const MemberArgs& a,
                                                         const std::string& members,
                                                         const collective::GlooOptions& go) {
  const auto slots = parse_ints(members);
  const int me = a.standby ? -1 : a.slot;
  const int rank = int(std::find(slots.begin(), slots.end(), me) - slots.begin());
  return collective::make_gloo_communicator(kv, a.run, 2, rank, int(slots.size()), go);
}

// Rank 0 (a survivor) sends its weights to the members that lack them
// (the standby: the last rank), and to them only; every member knows which
// ranks those are from the announced membership.
void share_weights(collective::Communicator& comm, models::DiT& model, const std::vector<int>& lacking) {
  auto flat = flat_weights(model).contiguous();
  const size_t bytes = size_t(flat.numel()) * sizeof(float);
  for (int r : lacking) {
    if (comm.rank() == 0) comm.send(flat.data_ptr(), bytes, r);
    if (comm.rank() == r) {
      comm.recv(flat.data_ptr(), bytes, 0);
      load_flat_weights(model, flat);
    }
  }
}

// The ranks of epoch 2 without weights: the standby's (slot -1).
std::vector<int> lacking_weights(const std::string& members) {
  const auto slots = parse_ints(members);
  std::vector<int> out;
  for (size_t r = 0; r < slots.size(); ++r)
    if (slots[r] < 0) out.push_back(int(r));
  return out;
}

std::string to_bytes(const torch::Tensor& t) {
  auto c = t.to(torch::kFloat32).contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), size_t(c.numel()) * sizeof(float));
}

torch::Tensor from_bytes(const std::string& b, torch::IntArrayRef shape) {
  auto t = torch::empty(shape, torch::kFloat32);
  if (size_t(t.numel()) * sizeof(float) != b.size()) throw std::runtime_error("a latent of the wrong size");
  std::memcpy(t.data_ptr(), b.data(), b.size());
  return t;
}

// A seeded SP rollout (10 SDE steps) that commits its latent after every
// step: rank 0 writes latent/<i> and then last = i to the head's KV. Killed
// mid-rollout, the survivors and the standby re-form and resume after the
// last committed step; the final image must equal an undisturbed run's.
int rollout_member(const MemberArgs& a) {
  at::set_num_threads(1);
  auto kv = head_kv(a.head);
  collective::GlooOptions go;
  go.timeout = 20s;
  models::DiT model = a.standby ? models::DiT(models::dit_config("tiny")) : models::load_checkpoint(a.checkpoint).model;
  const auto& cfg = model->config();
  const auto batch = fixed_batch(cfg);
  const std::vector<uint64_t> seeds{101, 202};
  models::SamplerOptions opts;
  const auto sigmas = models::shifted_sigmas(opts.steps, opts.shift);
  torch::NoGradGuard no_grad;
  auto run_steps = [&](collective::Communicator& comm, torch::Tensor x, int from) {
    models::SequenceParallel sp{&comm};
    for (int i = from; i < opts.steps; ++i) {
      x = models::denoise_step(model, x, batch.tokens, seeds, sigmas, i, opts, nullptr, &sp);
      if (comm.rank() == 0) {
        kv->set(key(a.run, "latent/" + std::to_string(i)), to_bytes(x));
        kv->set(key(a.run, "last"), std::to_string(i));
      }
    }
    if (comm.rank() == 0) kv->set(key(a.run, "final"), to_bytes(x));
    return x;
  };
  if (!a.standby) {
    auto comm = collective::make_gloo_communicator(*kv, a.run, 1, a.slot, a.degree, go);
    try {
      run_steps(*comm, models::initial_latent(cfg, seeds), 0);
      kv->wait(key(a.run, "exit"), 120s);
      return 0;
    } catch (const std::exception&) {  // the group broke: re-form below
    }
    collective::retire(std::move(comm));
  } else {
    model->forward(batch.x, batch.s, batch.tokens);  // a warm process
    kv->set(key(a.run, "ready/standby"), "1");
  }
  auto members = kv->wait(key(a.run, "epoch/2"), 120s);
  if (!members) return 2;
  auto comm = join_epoch_two(*kv, a, *members, go);
  share_weights(*comm, model, lacking_weights(*members));
  // The new rank 0 (the old one: slot 0 survives) has stopped writing: it
  // decides the resume point and sends it with the latent to everyone.
  auto x = models::initial_latent(cfg, seeds);
  int64_t last = -1;
  if (comm->rank() == 0) {
    if (auto l = kv->wait(key(a.run, "last"), 0ms)) {
      last = std::stoll(*l);
      x = from_bytes(*kv->wait(key(a.run, "latent/" + *l), 10s), x.sizes());
    }
  }
  comm->broadcast(&last, sizeof last, 0);
  x = x.contiguous();
  comm->broadcast(x.data_ptr(), size_t(x.numel()) * sizeof(float), 0);
  if (comm->rank() == 0) kv->set(key(a.run, "resumed_from"), std::to_string(last + 1));
  run_steps(*comm, x, int(last + 1));
  kv->wait(key(a.run, "exit"), 120s);
  return 0;
}

int member_main(const MemberArgs& a) {
  if (a.rollout) return rollout_member(a);
  at::set_num_threads(1);
  auto kv = head_kv(a.head);
  collective::GlooOptions go;
  go.timeout = 20s;
  if (a.restart) {  // the baseline: a fresh process, weights from the file
    const int64_t t0 = mono_ns();
    auto model = models::load_checkpoint(a.checkpoint).model;
    auto comm = collective::make_gloo_communicator(*kv, a.run + "-restart", 1, a.slot, a.degree, go);
    sp_step(model, *comm, fixed_batch(model->config()));
    kv->set(key(a.run, "restart-done/" + std::to_string(a.slot)), std::to_string(t0) + " " + std::to_string(mono_ns()));
    return 0;
  }
  models::DiT model = a.standby ? models::DiT(models::dit_config("tiny")) : models::load_checkpoint(a.checkpoint).model;
  const auto batch = fixed_batch(model->config());
  int64_t t_error = 0;
  std::map<int, std::unique_ptr<collective::Communicator>> prepared;
  std::vector<std::unique_ptr<collective::Communicator>> done_with;  // unused prepared ones, retired after the first step
  auto warm = [&](collective::Communicator& c) { sp_step(model, c, batch); };
  if (!a.standby) {
    auto comm = collective::make_gloo_communicator(*kv, a.run, 1, a.slot, a.degree, go);
    sp_step(model, *comm, batch);
    // The first few steps, timed: what a warm step costs at this degree.
    std::vector<int64_t> steps;
    for (int i = 0; i < 5; ++i) {
      const int64_t t0 = mono_ns();
      sp_step(model, *comm, batch);
      steps.push_back(mono_ns() - t0);
    }
    std::sort(steps.begin(), steps.end());
    if (!a.fresh) prepared = prepare_communicators(*kv, a, go, warm);
    kv->set(key(a.run, "ready/" + std::to_string(a.slot)), std::to_string(steps[steps.size() / 2]));
    try {
      for (;;) sp_step(model, *comm, batch);
    } catch (const std::exception&) {  // CollectiveError, or LibTorch's wrapping of it
      t_error = mono_ns();
    }
    // Closed at once, on a background thread: its dead pairs keep its
    // Gloo event loop spinning until they are gone.
    collective::retire(std::move(comm));
  } else {
    // A standby slot is a live process (an explorer between rollouts): its
    // LibTorch is warm, only the weights of this group are missing.
    torch::NoGradGuard no_grad;
    model->forward(batch.x, batch.s, batch.tokens);
    if (!a.fresh) prepared = prepare_communicators(*kv, a, go, warm);
    kv->set(key(a.run, "ready/standby"), "1");
  }
  // The new membership: slots in rank order, from the head's KV.
  auto members = kv->wait(key(a.run, "epoch/2"), 60s);
  if (!members) return 2;
  const int64_t t_members = mono_ns();
  std::unique_ptr<collective::Communicator> comm;
  for (auto& [victim, c] : prepared) {
    if (!comm && parse_ints(*members) == without(a.degree, victim)) comm = std::move(c);
    else done_with.push_back(std::move(c));
  }
  if (!comm) comm = join_epoch_two(*kv, a, *members, go);  // not a single failure: a new rendezvous
  const int64_t t_comm = mono_ns();
  share_weights(*comm, model, lacking_weights(*members));
  const int64_t t_weights = mono_ns();
  sp_step(model, *comm, batch);
  const int64_t t_step = mono_ns();
  for (auto& c : done_with) collective::retire(std::move(c));
  std::ostringstream ts;
  ts << t_error << " " << t_members << " " << t_comm << " " << t_weights << " " << t_step;
  kv->set(key(a.run, "reformed/" + std::to_string(comm->rank())), ts.str());
  kv->wait(key(a.run, "exit"), 60s);
  return 0;
}

struct Trial {
  int degree = 0;
  double detect_ms = 0, agree_ms = 0, comm_ms = 0, weights_ms = 0, step_ms = 0, reform_ms = 0, restart_ms = 0;
  double warm_step_ms = 0;  // an ordinary step of the group before the kill (median of 5, slowest member)
  double stop_ms = 0;       // of the restart: killing the group's processes
};

Trial run_trial(const std::string& self, const std::string& head, const std::string& checkpoint, int d,
                const std::string& logdir, bool fresh_rendezvous) {
  const std::string run = "d" + std::to_string(d) + "-" + std::to_string(::getpid());
  auto kv = head_kv(head);
  auto member_argv = [&](int slot, const char* extra) {
    std::vector<std::string> argv{self, "--member", "--head", head, "--run", run, "--slot", std::to_string(slot),
                                  "--degree", std::to_string(d), "--checkpoint", checkpoint};
    if (extra) argv.push_back(extra);
    if (fresh_rendezvous) argv.push_back("--fresh");
    return argv;
  };
  std::vector<pid_t> pids;
  for (int s = 0; s < d; ++s) pids.push_back(common::spawn(member_argv(s, nullptr), logdir + "/member.log"));
  const pid_t standby = common::spawn(member_argv(d, "--standby"), logdir + "/member.log");
  int64_t warm_step_ns = 0;
  for (int s = 0; s < d; ++s) {
    auto v = kv->wait(key(run, "ready/" + std::to_string(s)), 120s);
    if (!v) throw std::runtime_error("a member did not start");
    warm_step_ns = std::max(warm_step_ns, int64_t(std::stoll(*v)));
  }
  if (!kv->wait(key(run, "ready/standby"), 120s)) throw std::runtime_error("the standby did not start");

  // Kill member 1; announce survivors + standby (slot -1) in rank order.
  const int victim = 1;
  const int64_t t_kill = mono_ns();
  common::signal_process(pids[victim], SIGKILL);
  std::string members;
  for (int s = 0; s < d; ++s)
    if (s != victim) members += std::to_string(s) + ",";
  members += "-1";
  kv->set(key(run, "epoch/2"), members);

  std::vector<std::vector<int64_t>> stamps;
  for (int r = 0; r < d; ++r) {
    auto v = kv->wait(key(run, "reformed/" + std::to_string(r)), 120s);
    if (!v) throw std::runtime_error("the group did not re-form");
    std::istringstream in(*v);
    std::vector<int64_t> t(5);
    for (auto& x : t) in >> x;
    stamps.push_back(t);
  }
  auto latest = [&](int i) {
    int64_t m = 0;
    for (auto& t : stamps) m = std::max(m, t[i]);
    return m;
  };
  const double ms = 1e-6;
  Trial tr;
  tr.degree = d;
  tr.detect_ms = (latest(0) - t_kill) * ms;
  tr.agree_ms = (latest(1) - latest(0)) * ms;
  tr.comm_ms = (latest(2) - latest(1)) * ms;
  tr.weights_ms = (latest(3) - latest(2)) * ms;
  tr.step_ms = (latest(4) - latest(3)) * ms;
  tr.reform_ms = (latest(4) - latest(0)) * ms;
  tr.warm_step_ms = warm_step_ns * ms;
  // Restart baseline: stop the group's processes (SIGKILL, the fastest
  // stop there is), start d fresh ones.
  const int64_t t0 = mono_ns();
  for (pid_t p : pids) common::signal_process(p, SIGKILL);
  for (pid_t p : pids) common::wait_exit(p, 10s);
  const int64_t t_stopped = mono_ns();
  std::vector<pid_t> fresh;
  for (int s = 0; s < d; ++s) fresh.push_back(common::spawn(member_argv(s, "--restart"), logdir + "/member.log"));
  int64_t done = 0;
  for (int s = 0; s < d; ++s) {
    auto v = kv->wait(key(run, "restart-done/" + std::to_string(s)), 120s);
    if (!v) throw std::runtime_error("the restarted group did not run");
    std::istringstream in(*v);
    int64_t a = 0, b = 0;
    in >> a >> b;
    done = std::max(done, b);
  }
  tr.restart_ms = (done - t0) * ms;
  tr.stop_ms = (t_stopped - t0) * ms;
  for (pid_t p : fresh) common::wait_exit(p, 10s);
  kv->set(key(run, "exit"), "1");  // the standby leaves
  common::wait_exit(standby, 10s);
  return tr;
}

// The rollout check at degree d: an undisturbed SP rollout, then the same
// seeds with member 1 killed after step 3 is committed. Returns true when the
// final images are bit-identical.
bool rollout_trial(const std::string& self, const std::string& head, const std::string& checkpoint, int d,
                   const std::string& logdir) {
  auto kv = head_kv(head);
  auto launch = [&](const std::string& run, int slot, bool standby) {
    std::vector<std::string> argv{self, "--member", "--rollout", "--head", head, "--run", run, "--slot",
                                  std::to_string(slot), "--degree", std::to_string(d), "--checkpoint", checkpoint};
    if (standby) argv.push_back("--standby");
    return common::spawn(argv, logdir + "/member.log");
  };
  auto finish = [&](const std::string& run, std::vector<pid_t>& pids) {
    auto img = kv->wait(key(run, "final"), 120s);
    kv->set(key(run, "exit"), "1");
    for (pid_t p : pids) common::wait_exit(p, 10s);
    if (!img) throw std::runtime_error("rollout " + run + " did not finish");
    return *img;
  };
  const std::string base = "rollout-d" + std::to_string(d) + "-" + std::to_string(::getpid());
  std::vector<pid_t> ref_pids;
  for (int s = 0; s < d; ++s) ref_pids.push_back(launch(base + "-ref", s, false));
  const std::string reference = finish(base + "-ref", ref_pids);

  const std::string run = base + "-kill";
  std::vector<pid_t> pids;
  for (int s = 0; s < d; ++s) pids.push_back(launch(run, s, false));
  pids.push_back(launch(run, d, true));
  if (!kv->wait(key(run, "ready/standby"), 120s) || !kv->wait(key(run, "latent/3"), 120s))
    throw std::runtime_error("the rollout did not reach step 3");
  common::signal_process(pids[1], SIGKILL);
  std::string members;
  for (int s = 0; s < d; ++s)
    if (s != 1) members += std::to_string(s) + ",";
  kv->set(key(run, "epoch/2"), members + "-1");
  const std::string resumed = finish(run, pids);
  const auto from = kv->wait(key(run, "resumed_from"), 0ms);
  const bool same = resumed == reference;
  std::printf("rollout at d = %d: member 1 killed after step 3 was committed; the re-formed group resumed at step %s; "
              "final image identical to the undisturbed run: %s\n",
              d, from ? from->c_str() : "?", same ? "yes" : "NO");
  return same;
}

}  // namespace

int main(int argc, char** argv) {
  spotlight::tools::ensure_passive_omp(argv);
  CLI::App app{"spotlight-sp-bench: SP group re-formation after a kill, against a restart"};
  MemberArgs m;
  bool member = false, json = false;
  std::string degrees = "2,4";
  m.checkpoint = common::self_dir() + "/../../models/checkpoints/tiny.pt";
  app.add_option("--degrees", degrees, "SP degrees to measure, comma-separated");
  app.add_option("--checkpoint", m.checkpoint, "the DiT every member loads");
  app.add_flag("--json", json, "end with one JSON line: reform_ms_dN and restart_ms_dN");
  bool rollout = false;
  app.add_flag("--rollout", rollout,
               "instead: kill a member mid-rollout and check that the re-formed group finishes the same image");
  // Member processes (started by the bench itself).
  app.add_flag("--member", member)->group("");
  app.add_option("--head", m.head)->group("");
  app.add_option("--run", m.run)->group("");
  app.add_option("--slot", m.slot)->group("");
  app.add_option("--degree", m.degree)->group("");
  app.add_flag("--standby", m.standby)->group("");
  app.add_flag("--fresh", m.fresh,
               "re-form through a new rendezvous instead of the communicator prepared for a single failure");
  app.add_flag("--restart", m.restart)->group("");
  CLI11_PARSE(app, argc, argv);
  try {
    m.rollout = rollout;
    if (member) {
      // A member whose bench was killed has nobody to report to: end with it.
      common::watch_lifeline([] { std::_Exit(1); });
      return member_main(m);
    }
    if (!std::filesystem::exists(m.checkpoint)) throw std::runtime_error("no checkpoint at " + m.checkpoint);
    const auto ds = parse_ints(degrees);
    for (int d : ds)
      if (d < 2 || 4 % d != 0) throw std::invalid_argument("--degrees: each must be 2 or 4 (the tiny DiT has 4 heads)");
    char tmpl[] = "/tmp/spotlight-spbench-XXXXXX";
    if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
    const std::string dir = tmpl;
    // A fresh cluster key for the head, the members and this process's own
    // requests, through the environment that every process here inherits (set
    // before any of them exists, while no other thread reads the environment).
    const std::string key = transport::ClusterKey::generate().hex();
    setenv(transport::kKeyVariable, key.c_str(), 1);
    const pid_t head = common::spawn({common::find_spotlight_bin(), "head", "--port", "0", "--bind", "127.0.0.1",
                                      "--store", dir + "/head.db", "--port-file", dir + "/port"},
                                     dir + "/head.log");
    const std::string port = common::wait_for_file(dir + "/port", 10s);
    if (port.empty()) throw std::runtime_error("the head did not start (log: " + dir + "/head.log)");
    const std::string address = "127.0.0.1:" + port;
    const std::string self = common::self_dir() + "/spotlight-sp-bench";
    if (rollout) {
      bool all = true;
      for (int d : ds) all = rollout_trial(self, address, std::filesystem::absolute(m.checkpoint).string(), d, dir) && all;
      stop_cluster(address);
      common::wait_exit(head, 10s);
      std::filesystem::remove_all(dir);
      return all ? 0 : 1;
    }
    std::vector<Trial> trials;
    for (int d : ds) {
      std::cerr << "sp-bench: degree " << d << " ..." << std::endl;
      trials.push_back(run_trial(self, address, std::filesystem::absolute(m.checkpoint).string(), d, dir, m.fresh));
    }
    stop_cluster(address);
    common::wait_exit(head, 10s);
    std::printf("\ncommunicator of the re-formed group: %s\n",
                m.fresh ? "a new rendezvous (--fresh)" : "prepared for a single failure while the group was whole");
    std::printf("\n| d | detection ms | agreement ms | communicator ms | weight copy ms | first step ms | "
                "re-formation ms (excl. detection) | restart ms (of which stop) | restart / re-formation | warm step ms |\n");
    std::printf("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    std::ostringstream js;
    js << "{";
    for (size_t i = 0; i < trials.size(); ++i) {
      const auto& t = trials[i];
      std::printf("| %d | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f (%.1f) | %.1fx | %.1f |\n", t.degree,
                  t.detect_ms, t.agree_ms, t.comm_ms, t.weights_ms, t.step_ms, t.reform_ms, t.restart_ms, t.stop_ms,
                  t.restart_ms / t.reform_ms, t.warm_step_ms);
      js << (i ? "," : "") << "\"reform_ms_d" << t.degree << "\":" << t.reform_ms << ",\"restart_ms_d" << t.degree
         << "\":" << t.restart_ms;
    }
    js << "}";
    if (json) std::cout << js.str() << std::endl;
    std::filesystem::remove_all(dir);
  } catch (const std::exception& e) {
    std::cerr << "spotlight-sp-bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
