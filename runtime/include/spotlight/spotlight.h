// The Spotlight runtime's client API.
//
//   auto cluster = spotlight::local_cluster({.nodes = 2, .load = {"libhello_actors.so"}});
//   auto rt = cluster.connect();                         // or spotlight::connect("head:6380")
//   auto counter = rt.spawn<Counter>("counter", spotlight::on_market("reserved"));
//   spotlight::Future<int> f = counter.call(&Counter::add, 5);
//   int v = f.get();
//   auto squares = rt.pool<Square>("squares", spotlight::on_market("any").members(4));
//
// A call is accepted only once the head has committed it to its store; it
// survives the loss of the node that runs it, a restart of the head, and the
// death of its caller (another client fetches it by task id: Runtime::fetch).
#pragma once

#include <csignal>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "spotlight/actor.h"
#include "spotlight/codec.h"
#include "spotlight/errors.h"
#include "spotlight/future.h"
#include "spotlight/objects.h"
#include "spotlight/options.h"
#include "spotlight/status.h"

namespace spotlight {

namespace detail {
class Client;
// The task whose calls a Runtime makes (TaskContext::runtime()): its calls are
// numbered in the order it makes them, and their ids derive from that.
class CallOrigin {
 public:
  CallOrigin(uint64_t parent_task, int32_t sp_rank, uint64_t lineage)
      : parent(parent_task), rank(sp_rank), lineage_(lineage) {}
  const uint64_t parent;
  const int32_t rank;  // in an SP group each member's calls are its own
  // The key of the next call (wire/child_ids.h).
  uint64_t next_key();
  // The task committed: its calls from here on are numbered afresh under it.
  void rebase(uint64_t lineage);

 private:
  std::mutex mu_;
  uint64_t lineage_;
  uint32_t next_ = 0;
};
// Submits one call; the returned state resolves with its result.
std::shared_ptr<FutureState> submit(Client& c, const std::string& mailbox,
                                    const std::string& method, std::string args,
                                    const CallOptions& options = {}, CallOrigin* origin = nullptr);
// Awaits the result of call `task_id`, made by any client (see Runtime::fetch).
std::shared_ptr<FutureState> fetch(Client& c, uint64_t task_id);
// The connection and call numbering of the task running on this thread
// (running_task()); throws std::logic_error, saying what to do, outside one.
std::pair<std::shared_ptr<Client>, std::shared_ptr<CallOrigin>> task_binding(
    const std::string& handle);
}  // namespace detail

// A handle to a lone actor or a pool: calls go to its mailbox, and whichever
// member pulls a call runs it.
//
// A handle travels in calls and results as its actor type's name and its
// mailbox (a method may take `ActorHandle<Explorer>`, as Ray's may take an
// actor handle): one that arrives in a task's arguments calls through that
// task's runtime (ctx.runtime()), from the task's own thread. Unpacking a
// handle of another type fails, so a call that passes one is rejected. A
// handle that arrives elsewhere (a driver's result) has no runtime: take one
// by name, rt.actor<A>(handle.name()).
template <class A>
class ActorHandle {
 public:
  ActorHandle() = default;  // no actor; what unpacking fills in
  ActorHandle(std::shared_ptr<detail::Client> c, std::string mailbox,
              std::shared_ptr<detail::CallOrigin> origin = nullptr)
      : client_(std::move(c)), mailbox_(std::move(mailbox)), origin_(std::move(origin)) {}

  template <class M, class... Args>
  auto call(M method, Args&&... args) {
    using Tr = detail::method_traits<M>;
    static_assert(std::is_base_of_v<typename Tr::cls, A>, "method of another actor type");
    using R = std::decay_t<typename Tr::ret>;
    typename Tr::args tuple(std::forward<Args>(args)...);
    if (!client_) std::tie(client_, origin_) = detail::task_binding(mailbox_);
    return Future<R>(detail::submit(*client_, mailbox_, detail::method_name(method), pack(tuple),
                                    options_, origin_.get()));
  }
  // The same handle, whose calls carry `options`.
  ActorHandle with(CallOptions options) const {
    ActorHandle h = *this;
    h.options_ = options;
    return h;
  }
  const std::string& name() const { return mailbox_; }

 private:
  std::shared_ptr<detail::Client> client_;
  std::string mailbox_;
  CallOptions options_;
  std::shared_ptr<detail::CallOrigin> origin_;  // set for a task's own calls
};

class Runtime {
 public:
  explicit Runtime(std::shared_ptr<detail::Client> c,
                   std::shared_ptr<detail::CallOrigin> origin = nullptr)
      : client_(std::move(c)), origin_(std::move(origin)) {}

  // A lone actor (a pool of one), placed on a slot that matches `where`.
  template <class A>
  ActorHandle<A> spawn(const std::string& name, Placement where = {}) {
    where.size = 1;
    create_pool(name, actor_type_name<A>(), where);
    return actor<A>(name);
  }
  // A pool of `where.size` actors of type A sharing one mailbox. Members that
  // find no free slot wait for one; a node that joins later takes them.
  template <class A>
  ActorHandle<A> pool(const std::string& name, Placement where) {
    create_pool(name, actor_type_name<A>(), where);
    return actor<A>(name);
  }
  // A handle to an actor or pool that exists, by its name (nothing is
  // created or checked: a call to a name the head does not know is rejected).
  template <class A>
  ActorHandle<A> actor(const std::string& name) const {
    return ActorHandle<A>(client_, name, origin_);
  }
  // Creates the pool (idempotent for the same type); returns once committed.
  // A pool that exists keeps its options: what it kept of those `where` asks
  // to change comes back ("members 4 (asked 8)", also logged as a warning),
  // empty when the pool was made now or already has them. To change a
  // pool's placement, remove it and create it again.
  std::string create_pool(const std::string& name, const std::string& type, const Placement& where);
  // Removes an actor or pool (Ray's kill): its waiting and running calls fail
  // with RejectedError, its actors leave their nodes (a running method ends
  // on its own, its result dropped) and their slots are free at once. Returns
  // once committed; later calls to the name are rejected until it is created
  // again. Throws RejectedError for a name the head does not know.
  void remove_pool(const std::string& name);

  // A call by names, for tools and for types this program does not link.
  template <class R, class... Args>
  Future<R> call(const std::string& mailbox, const std::string& method, Args&&... args) {
    return Future<R>(detail::submit(*client_, mailbox, method,
                                    pack(std::make_tuple(std::forward<Args>(args)...)), {},
                                    origin_.get()));
  }

  // Takes over call `task_id` (Future::task_id()) from whichever client made
  // it: the head makes this client its caller, durably, and the future
  // resolves with the call's result when it is stored, or at once if it is.
  // This is how a driver that restarts collects the calls it made before it
  // died. The client that made the call, if it still waits, gets
  // RejectedError; so does this future if the head does not hold the call
  // (never accepted, or its result already received by its caller). Fetching
  // a call this client is already waiting for returns the same result.
  template <class R>
  Future<R> fetch(uint64_t task_id) {
    return Future<R>(detail::fetch(*client_, task_id));
  }
  // Ray's cancel: calls that have not finished fail with CancelledError and
  // do not run (again). A waiting call leaves its mailbox, a call its actor
  // holds leased ahead is dropped there, and a running one sees
  // TaskContext::cancelled() (and should_yield()) turn true: it stops when
  // it next looks, or runs to its end, its result dropped. With `children`,
  // the unfinished calls a cancelled call's runs made are cancelled too, and
  // theirs. Any client may cancel any call by id; the call's caller hears of
  // it through its future. Returns, in order, what became of each call once
  // the head has committed it; a cancelled call stays cancelled across a
  // head restart. Throws ConnectionError when the head does not answer.
  std::vector<CancelOutcome> cancel(const std::vector<uint64_t>& task_ids, bool children = true);
  CancelOutcome cancel(uint64_t task_id, bool children = true) {
    return cancel(std::vector<uint64_t>{task_id}, children).front();
  }
  // A future without an id (refused before it got one) is finished already.
  template <class T>
  CancelOutcome cancel(const Future<T>& f, bool children = true) {
    return f.task_id() == 0 ? CancelOutcome::kFinished : cancel(f.task_id(), children);
  }

  // Returns once the head has committed every call this runtime submitted
  // before (or answered it): from then on they survive this process, and
  // another one can fetch them. Throws ConnectionError after `timeout`.
  void wait_accepted(std::chrono::milliseconds timeout = std::chrono::seconds(30));

  // The driver's object store (spotlight/objects.h), made on first use: a
  // put here is served to the cluster's nodes from this process (actors get
  // it with ctx.objects().get(id)), and a get copies an object an actor put,
  // or waits for it. Copies live as long as this Runtime's connection: the
  // head forgets them when it closes, or when the driver dies. Inside a task
  // use ctx.objects(), the node's store (this throws RejectedError there).
  ObjectStore& objects();

  ClusterStatus status();
  // The calls the head holds that match `query`, the earliest accepted
  // first: waiting, leased (where) or finished and not yet received (how
  // they ended). Throws RejectedError for a bad query.
  TaskList tasks(const TaskQuery& query = {});
  // Gives node `node_id` notice: it takes no new work, hands back what has not
  // started, lets running tasks yield, and leaves by `deadline`.
  void drain(const std::string& node_id, std::chrono::milliseconds deadline);
  // Asks the head to stop every node and itself.
  void stop_cluster();
  const std::string& address() const;
  // Calls accepted or sent and not yet answered.
  size_t pending() const;

 private:
  friend std::pair<std::shared_ptr<detail::Client>, std::shared_ptr<detail::CallOrigin>>
  detail::task_binding(const std::string& handle);
  std::shared_ptr<detail::Client> client_;
  std::shared_ptr<detail::CallOrigin> origin_;  // TaskContext::runtime(): the task's own calls
};

// Connects to a head at "HOST:PORT" (or "tcp://HOST:PORT"); throws ConnectionError,
// at once when the head refuses this process's cluster key.
Runtime connect(const std::string& address, ConnectOptions options = {});

// Sets the cluster key of this process's connections (64 hex digits, as
// `spotlight head` printed it, or "none"): those of connect() without a key
// of their own, of cluster_status, stop_cluster, drain_node and head_kv, and
// of nodes this process runs. By default the key is $SPOTLIGHT_CLUSTER_KEY's.
// Throws std::invalid_argument for a malformed key.
void use_cluster_key(const std::string& key);

// One-shot requests that need no client session (what `spotlight status` and
// `spotlight stop` use); throw ConnectionError when the head does not answer.
ClusterStatus cluster_status(const std::string& address,
                             std::chrono::milliseconds timeout = std::chrono::seconds(5));
void stop_cluster(const std::string& address,
                  std::chrono::milliseconds timeout = std::chrono::seconds(5));
TaskList list_tasks(const std::string& address, const TaskQuery& query = {},
                    std::chrono::milliseconds timeout = std::chrono::seconds(5));
void drain_node(const std::string& address, const std::string& node_id,
                std::chrono::milliseconds deadline,
                std::chrono::milliseconds timeout = std::chrono::seconds(5));

// A head and N nodes as child processes on loopback: everything on one machine, no set-up.
class LocalCluster {
 public:
  explicit LocalCluster(ClusterOptions options);
  LocalCluster(LocalCluster&&) noexcept;
  LocalCluster& operator=(LocalCluster&&) noexcept;
  ~LocalCluster();  // stops the cluster

  const std::string& address() const;  // "127.0.0.1:PORT"
  Runtime connect(ConnectOptions options = {}) const;
  // Starts one more node and waits until the head counts it; returns its index.
  int add_node(int slots, const std::string& market);
  // Starts one more node without waiting; `extra` are more `join` arguments.
  int start_node(int slots, const std::string& market, const std::vector<std::string>& extra = {});
  // The process ids of the head and of node `index`.
  int head_pid() const;
  int node_pid(int index) const;
  // Where the head's and nodes' logs go (head.log, node-N.log) with `quiet`;
  // removed when the cluster stops, kept when SPOTLIGHT_KEEP_LOGS is set or
  // the driver dies without stopping it.
  const std::string& log_dir() const;
  // The cluster's key (64 hex digits, or "none" with ClusterOptions::insecure):
  // what another process needs to connect (connect's ConnectOptions::cluster_key,
  // or $SPOTLIGHT_CLUSTER_KEY).
  const std::string& key() const;
  void kill_node(int index, int signal = SIGKILL);
  int node_count() const;
  // Kills the head (kill -9 by default) and starts it again on the same store and port.
  void kill_head(int signal = SIGKILL);
  void start_head();
  const std::string& store_path() const;
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

LocalCluster local_cluster(ClusterOptions options = {});

}  // namespace spotlight

// ActorHandle<A> in msgpack: [actor type name, mailbox].
namespace msgpack {
MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS) {
  namespace adaptor {
  template <class A>
  struct pack<spotlight::ActorHandle<A>> {
    template <class Stream>
    packer<Stream>& operator()(packer<Stream>& o, const spotlight::ActorHandle<A>& h) const {
      o.pack_array(2);
      o.pack(spotlight::actor_type_name<A>());
      o.pack(h.name());
      return o;
    }
  };
  template <class A>
  struct convert<spotlight::ActorHandle<A>> {
    const msgpack::object& operator()(const msgpack::object& o,
                                      spotlight::ActorHandle<A>& h) const {
      if (o.type != msgpack::type::ARRAY || o.via.array.size != 2) throw msgpack::type_error();
      const std::string type = o.via.array.ptr[0].as<std::string>();
      const std::string& want = spotlight::detail::actor_type_name<A>();
      if (type != want) {
        throw std::invalid_argument(
            "a handle to a " + type + " where a handle to a " +
            (want.empty() ? std::string("type not registered here") : want) + " was expected");
      }
      h = spotlight::ActorHandle<A>(nullptr, o.via.array.ptr[1].as<std::string>());
      return o;
    }
  };
  }  // namespace adaptor
}  // MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS)
}  // namespace msgpack
