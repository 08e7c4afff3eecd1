// Every message of the protocol: its type number and its msgpack body.
// A message on the wire is the envelope [version, type, request id, body]
// (envelope.h). Bump kProtocolVersion on any incompatible change to a body.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "spotlight/codec.h"
#include "spotlight/status.h"
#include "spotlight/task.h"

namespace spotlight::wire {

// 2: SP groups (Task.group, CreatePool.sp_degree, Probe), objects;
// 3: results acknowledged to nodes (Done.seq, Tasks and Heartbeat done_acked);
// 4: Fetch (a client takes over another client's call by its task id), Sync,
//    call deadlines (Call.deadline_ms, Task.start_within_ms);
// 5: calls made by running tasks (Call.parent, Call.child_key, ids from child_ids.h,
//    HelloClient.node_id);
// 6: RemovePool (client -> head) and Unplace (head -> node);
// 7: call priorities (Call.priority, Task.priority, PoolStatus.by_priority);
// 8: Cancel (client -> head, head -> node) and CancelReply; ClusterStatus.metrics_address;
//    TasksRequest and TaskList; CreatePool.strategy and node.
// 9: priority aging (CreatePool.aging_ms, Task.aging_ms and waited_ms),
//    CreatePool.max_per_node and prefer.
// 10: affinity between pools (CreatePool.beside, beside_soft and away_from); PoolCreated.kept,
//    the options of an existing pool that a second create asked to change;
//    preemption by priority (CreatePool.preempt, Task.preemptive); ErrorCode::kRefused;
//    Welcome.seq_floor.
// 11: TaskQuery.method, node, outcome and caller (an older head would list
//    every call, unfiltered).
inline constexpr uint16_t kProtocolVersion = 11;

enum class MsgType : uint16_t {
  kError = 1,
  kHelloNode = 2,
  kHelloClient = 3,
  kWelcome = 4,
  kHeartbeat = 5,
  kCreatePool = 10,
  kPoolCreated = 11,
  kRemovePool = 12,  // client -> head: remove an actor or pool (answered Ok or Error)
  kCalls = 20,
  kAccepted = 21,
  kResults = 22,
  kAckResults = 23,
  kFetch = 24,   // client -> head: send me the results of these calls (answered with Results)
  kSync = 25,    // client -> head: answered Ok once every call sent before it is committed
  kCancel = 26,  // client -> head (answered CancelReply); head -> node: stop these tasks
  kCancelReply = 27,
  kPlace = 30,
  kPlaced = 31,
  kTasks = 32,
  kDone = 33,
  kCommits = 34,
  kDrain = 35,
  kUnplace = 36,  // head -> node: stop hosting these actors (their pool was removed)
  kStatusRequest = 40,
  kStatus = 41,
  kStop = 42,
  kShutdown = 43,
  kOk = 44,
  kProbe = 45,         // head -> node: answer at once (a Probe with the same request id)
  kTasksRequest = 46,  // any -> head: list the calls it holds (a TaskQuery; answered TaskList)
  kTaskList = 47,
  kKvSet = 50,
  kKvGet = 51,
  kKvValue = 52,
  kKvDelete = 53,     // any -> head: forget a key (answered KvValue: found, no value)
  kObjectAdd = 60,    // node -> head: this node holds a copy (answered Ok)
  kObjectDrop = 61,   // node -> head: it no longer does (not answered)
  kObjectWhere = 62,  // any -> head: who holds it (answered ObjectLocations)
  kObjectLocations = 63,
  kObjectFetch = 64,  // node -> another node's object server: a chunk of a copy
  kObjectChunk = 65,
};

const char* to_string(MsgType t);
bool is_known(uint16_t type);

// Why a frame or a request was refused.
enum class ErrorCode : int32_t {
  kMalformed = 1,    // not msgpack, or not an envelope, or a body of the wrong shape
  kBadVersion = 2,   // another protocol version
  kUnknownType = 3,  // a message type this peer does not know
  kOversized = 4,    // over the frame size limit
  kUnknownPeer = 5,  // a peer that has not said hello (e.g. after a head restart)
  kBadRequest = 6,   // a well-formed request that cannot be served
  kRefused = 7,      // a client's hello the head will not take (it holds its most clients)
};
const char* to_string(ErrorCode c);

struct Error {
  int32_t code = 0;
  std::string message;
  MSGPACK_DEFINE(code, message)
};

// An actor a node still hosts when it says hello again (after a head restart).
struct HostedActor {
  uint64_t actor_id = 0;
  uint32_t incarnation = 0;
  MSGPACK_DEFINE(actor_id, incarnation)
};

struct HelloNode {
  std::string node_id;
  std::string host;
  int64_t pid = 0;
  std::string market;
  int32_t slots = 0;
  std::vector<std::string> types;  // actor types this node can host
  uint32_t session = 0;  // grows each time the node says hello again
  std::vector<HostedActor> hosted;  // the head takes back those it still knows
  std::vector<uint64_t> held;        // tasks it still runs, holds queued, or holds a result of
  std::string object_address;        // HOST:PORT of its object server
  MSGPACK_DEFINE(node_id, host, pid, market, slots, types, session, hosted, held, object_address)
};

struct HelloClient {
  std::string client_id;
  // Every call the client still awaits a result for. A stored result of this
  // client that is not listed was received (its acknowledgement was lost in a
  // head crash) and is forgotten.
  std::vector<uint64_t> awaiting;
  // Set by a node's connection for its tasks' calls (TaskContext::runtime()):
  // the head takes a task's calls only from the node that runs the task.
  std::string node_id;
  MSGPACK_DEFINE(client_id, awaiting, node_id)
};

struct Welcome {
  uint64_t boot = 0;
  uint32_t client_num = 0;  // clients only: the prefix of their task ids
  int32_t heartbeat_ms = 0;
  int32_t liveness_ms = 0;
  uint64_t max_frame = 0;
  std::vector<uint64_t> adopted;  // nodes only: hosted actors the head took back; drop the rest
  // Clients only: the highest sequence already used under client_num. A
  // client's next call takes a higher one, so a number given out again
  // (HeadOptions::max_clients) never repeats an id its earlier holder used.
  uint64_t seq_floor = 0;
  MSGPACK_DEFINE(boot, client_num, heartbeat_ms, liveness_ms, max_frame, adopted, seq_floor)
};

struct Heartbeat {
  uint64_t boot = 0;
  uint64_t done_acked = 0;  // head -> node: as in Tasks
  MSGPACK_DEFINE(boot, done_acked)
};

struct CreatePool {
  std::string name;
  std::string type;
  std::string market;
  int32_t size = 1;
  int32_t slots_per_actor = 1;
  int32_t prefetch = 16;
  int32_t sp_degree = 1;
  std::string strategy = "spread";  // Placement::strategy
  std::string node;                 // Placement::node
  int64_t aging_ms = 0;             // Placement::aging
  int32_t max_per_node = 0;         // Placement::max_per_node
  std::string prefer{};             // Placement::prefer
  std::string beside{};             // Placement::beside
  std::string away_from{};          // Placement::away_from
  bool preempt = false;             // Placement::preempt
  bool beside_soft = false;         // Placement::beside_soft
  MSGPACK_DEFINE(name, type, market, size, slots_per_actor, prefetch, sp_degree, strategy, node,
                 aging_ms, max_per_node, prefer, beside, away_from, preempt, beside_soft)
};

struct PoolCreated {
  std::string name;
  bool ok = false;
  std::string error;
  // The pool existed and keeps its own options where this create asked for
  // others ("members 4 (asked 8), prefetch 1 (asked 16)"); empty when it was
  // made now or asked for what it has.
  std::string kept{};
  MSGPACK_DEFINE(name, ok, error, kept)
};

struct RemovePool {
  std::string name;
  MSGPACK_DEFINE(name)
};

// The node stops hosting these actors: queued tasks are dropped, a running
// one finishes on its own (the head no longer waits for its result).
struct Unplace {
  std::vector<uint64_t> actors;
  MSGPACK_DEFINE(actors)
};

struct Call {
  // (client number << 40) | sequence: resubmission is idempotent. A call made
  // by a running task has a child id instead (wire/child_ids.h), derived from
  // `parent`, `child_key` and what it calls, so that every attempt of the
  // parent makes the same calls under the same ids.
  uint64_t id = 0;
  std::string mailbox;
  std::string method;
  Blob args;
  uint32_t max_attempts = 0;  // runs lost with their node before the call fails; 0: the default
  int64_t deadline_ms = 0;    // every run must start within this long of acceptance; 0: none
  uint64_t parent = 0;        // the task that made the call; 0: a driver's call
  uint64_t child_key = 0;     // the call's number within the parent's run, and more (child_ids.h)
  int32_t priority = 0;       // higher is leased, and run, first (CallOptions::priority)
  MSGPACK_DEFINE(id, mailbox, method, args, max_attempts, deadline_ms, parent, child_key, priority)
};
struct Calls {
  std::vector<Call> calls;
  MSGPACK_DEFINE(calls)
};

struct Accepted {
  std::vector<uint64_t> ids;
  MSGPACK_DEFINE(ids)
};

struct Result {
  uint64_t id = 0;
  bool ok = false;
  int32_t kind = 0;  // spotlight::ErrorKind when !ok
  std::string error_type;
  Blob payload;  // msgpack value when ok, else the error message
  MSGPACK_DEFINE(id, ok, kind, error_type, payload)
};
struct Results {
  std::vector<Result> results;
  MSGPACK_DEFINE(results)
};

struct AckResults {
  std::vector<uint64_t> ids;
  MSGPACK_DEFINE(ids)
};

// Calls made by another client (a driver that died, say) whose results this
// client now awaits: the head makes it their caller, durably, and sends each
// result once it is stored. An id the head does not hold is answered with a
// rejected Result.
struct Fetch {
  std::vector<uint64_t> ids;
  MSGPACK_DEFINE(ids)
};

// Client -> head: cancel these calls (Runtime::cancel). Head -> node: these
// leased tasks were cancelled; drop them, or tell them if they run
// (TaskContext::cancelled()); `children` is unused there.
struct Cancel {
  std::vector<uint64_t> ids;
  bool children = true;  // also cancel the unfinished calls their runs made
  MSGPACK_DEFINE(ids, children)
};

// The outcome of each id of a Cancel, in order (spotlight::CancelOutcome).
struct CancelReply {
  std::vector<int32_t> outcomes;
  MSGPACK_DEFINE(outcomes)
};

struct Place {
  uint64_t actor_id = 0;
  std::string pool;
  std::string type;
  uint32_t incarnation = 0;
  int32_t prefetch = 1;
  bool has_state = false;  // restore() the actor from `state` before its first task
  Blob state;
  MSGPACK_DEFINE(actor_id, pool, type, incarnation, prefetch, has_state, state)
};

struct Placed {
  uint64_t actor_id = 0;
  uint32_t incarnation = 0;
  bool ok = false;
  std::string error;
  MSGPACK_DEFINE(actor_id, incarnation, ok, error)
};

struct Task {
  uint64_t id = 0;
  uint64_t actor_id = 0;
  uint64_t epoch = 0;  // lease epoch: a completion must present it
  std::string method;
  Blob args;
  uint32_t attempt = 1;
  bool resumed = false;  // an earlier attempt committed `resume`
  Blob resume;
  SpGroup group;  // size 0 outside SP pools
  // The call's deadline, as time left when leased: a node that cannot start
  // the task within it fails the call as timed out instead. 0: none.
  int64_t start_within_ms = 0;
  // The call's priority: an actor runs the tasks it holds highest first.
  int32_t priority = 0;
  // Its pool's Placement::aging, and how long the call had waited since the
  // head accepted it when leased: with aging, an actor runs the tasks it
  // holds in the head's order (the earliest accepted - priority × aging).
  int64_t aging_ms = 0;
  int64_t waited_ms = 0;
  // Its pool's Placement::preempt: arriving at an actor that runs a call of
  // lower priority (with aging, a later key), it asks that call to yield.
  bool preemptive = false;
  MSGPACK_DEFINE(id, actor_id, epoch, method, args, attempt, resumed, resume, group,
                 start_within_ms, priority, aging_ms, waited_ms, preemptive)
  // Not on the wire: the node's own clock at receipt plus start_within_ms.
  std::chrono::steady_clock::time_point start_by{};
  // Not on the wire, with aging: accepted - priority × aging on the node's
  // steady clock (ms), the key its actor's queue is ordered by.
  int64_t run_key = 0;
};
// Completion::error_type of a task that yielded because a call of higher
// priority came for its actor (Placement::preempt), not for a notice.
inline constexpr const char* kYieldedToPriority = "yielded_to_priority";

struct Tasks {
  std::vector<Task> tasks;
  // The node's Done frames up to this seq are committed: it may forget them.
  // Until then it keeps their results, and sends them again to a head that
  // welcomes it after a restart (the old one may have died before its commit).
  uint64_t done_acked = 0;
  MSGPACK_DEFINE(tasks, done_acked)
};

struct Completion {
  uint64_t id = 0;
  uint64_t actor_id = 0;
  uint64_t epoch = 0;
  bool ok = false;
  int32_t kind = 0;
  std::string error_type;
  Blob payload;
  bool has_actor_state = false;  // the actor's save() after this task
  Blob actor_state;
  MSGPACK_DEFINE(id, actor_id, epoch, ok, kind, error_type, payload, has_actor_state, actor_state)
};
struct Done {
  std::vector<Completion> done;
  uint64_t seq = 0;  // grows with each Done frame of a node, across sessions
  MSGPACK_DEFINE(done, seq)
};

// In-flight state of a running task (TaskContext::commit), node -> head.
struct Commit {
  uint64_t id = 0;
  uint64_t actor_id = 0;
  uint64_t epoch = 0;
  Blob state;
  MSGPACK_DEFINE(id, actor_id, epoch, state)
};
struct Commits {
  std::vector<Commit> commits;
  MSGPACK_DEFINE(commits)
};

// Notice that a node is going away: from a tool to the head (drain that node),
// from the head to the node, or from a node to the head (it got SIGTERM or a
// cloud notice). The node gets no new work and hands its tasks back.
struct Drain {
  std::string node_id;
  int64_t deadline_ms = 30000;  // from now; the node exits by then
  MSGPACK_DEFINE(node_id, deadline_ms)
};

struct Empty {
  MSGPACK_DEFINE()
};

// The head's key-value store, where the members of an SP group rendezvous.
// In memory: a restarted head starts empty (groups re-form with a new epoch,
// whose keys are new). Set answers Ok; Get answers KvValue, at once or, with
// wait_ms > 0, when the key is set or the wait ends (found = false).
struct KvSet {
  std::string key;
  std::string value;
  MSGPACK_DEFINE(key, value)
};

struct KvGet {
  std::string key;
  int64_t wait_ms = 0;
  MSGPACK_DEFINE(key, wait_ms)
};

struct KvDelete {
  std::string key;
  MSGPACK_DEFINE(key)
};

struct KvValue {
  bool found = false;
  std::string value;
  MSGPACK_DEFINE(found, value)
};

// The object directory: the head keeps where each object's copies are, never
// their bytes; nodes copy them from each other (spotlight/objects.h).
// A holder that is a driver's store (Runtime::objects()), not a node's:
// "driver:" then the client's id; the head takes it while that client is connected.
inline constexpr const char* kDriverHolderPrefix = "driver:";

struct ObjectAdd {
  std::string id;
  std::string node_id;  // or a driver's holder name (kDriverHolderPrefix)
  std::string address;  // HOST:PORT of the node's object server
  uint64_t size = 0;
  uint64_t digest = 0;  // of the bytes: the same id must always name the same bytes
  MSGPACK_DEFINE(id, node_id, address, size, digest)
};

struct ObjectDrop {
  std::string id;
  std::string node_id;
  MSGPACK_DEFINE(id, node_id)
};

struct ObjectWhere {
  std::string id;
  int64_t wait_ms = 0;  // > 0: answer when a copy appears, or when the wait ends (found = false)
  MSGPACK_DEFINE(id, wait_ms)
};

struct ObjectLocations {
  bool found = false;
  uint64_t size = 0;
  uint64_t digest = 0;
  std::vector<std::string> node_ids;
  std::vector<std::string> addresses;  // of their object servers, same order
  MSGPACK_DEFINE(found, size, digest, node_ids, addresses)
};

struct ObjectFetch {
  std::string id;
  uint64_t offset = 0;
  uint64_t length = 0;
  MSGPACK_DEFINE(id, offset, length)
};

// An object server's answer: this envelope, then the chunk's bytes as a
// second frame of the same message (sent from the stored copy without
// copying it).
struct ObjectChunk {
  bool found = false;  // false: this node no longer holds the object
  uint64_t offset = 0;
  uint64_t total = 0;
  MSGPACK_DEFINE(found, offset, total)
};

// Message type of each body, for encode<T>().
template <class T>
struct type_of;
#define SPOTLIGHT_WIRE_TYPE_(T, V) \
  template <>                       \
  struct type_of<T> {               \
    static constexpr MsgType value = MsgType::V; \
  };
SPOTLIGHT_WIRE_TYPE_(Error, kError)
SPOTLIGHT_WIRE_TYPE_(HelloNode, kHelloNode)
SPOTLIGHT_WIRE_TYPE_(HelloClient, kHelloClient)
SPOTLIGHT_WIRE_TYPE_(Welcome, kWelcome)
SPOTLIGHT_WIRE_TYPE_(Heartbeat, kHeartbeat)
SPOTLIGHT_WIRE_TYPE_(CreatePool, kCreatePool)
SPOTLIGHT_WIRE_TYPE_(PoolCreated, kPoolCreated)
SPOTLIGHT_WIRE_TYPE_(RemovePool, kRemovePool)
SPOTLIGHT_WIRE_TYPE_(Calls, kCalls)
SPOTLIGHT_WIRE_TYPE_(Accepted, kAccepted)
SPOTLIGHT_WIRE_TYPE_(Results, kResults)
SPOTLIGHT_WIRE_TYPE_(AckResults, kAckResults)
SPOTLIGHT_WIRE_TYPE_(Fetch, kFetch)
SPOTLIGHT_WIRE_TYPE_(Cancel, kCancel)
SPOTLIGHT_WIRE_TYPE_(CancelReply, kCancelReply)
SPOTLIGHT_WIRE_TYPE_(Place, kPlace)
SPOTLIGHT_WIRE_TYPE_(Placed, kPlaced)
SPOTLIGHT_WIRE_TYPE_(Tasks, kTasks)
SPOTLIGHT_WIRE_TYPE_(Done, kDone)
SPOTLIGHT_WIRE_TYPE_(Commits, kCommits)
SPOTLIGHT_WIRE_TYPE_(Drain, kDrain)
SPOTLIGHT_WIRE_TYPE_(Unplace, kUnplace)
SPOTLIGHT_WIRE_TYPE_(ClusterStatus, kStatus)
SPOTLIGHT_WIRE_TYPE_(TaskQuery, kTasksRequest)
SPOTLIGHT_WIRE_TYPE_(TaskList, kTaskList)
SPOTLIGHT_WIRE_TYPE_(KvSet, kKvSet)
SPOTLIGHT_WIRE_TYPE_(KvGet, kKvGet)
SPOTLIGHT_WIRE_TYPE_(KvValue, kKvValue)
SPOTLIGHT_WIRE_TYPE_(KvDelete, kKvDelete)
SPOTLIGHT_WIRE_TYPE_(ObjectAdd, kObjectAdd)
SPOTLIGHT_WIRE_TYPE_(ObjectDrop, kObjectDrop)
SPOTLIGHT_WIRE_TYPE_(ObjectWhere, kObjectWhere)
SPOTLIGHT_WIRE_TYPE_(ObjectLocations, kObjectLocations)
SPOTLIGHT_WIRE_TYPE_(ObjectFetch, kObjectFetch)
SPOTLIGHT_WIRE_TYPE_(ObjectChunk, kObjectChunk)
#undef SPOTLIGHT_WIRE_TYPE_

}  // namespace spotlight::wire
