#include "models/ulysses.h"

#include "models/dit.h"

namespace spotlight::models {
namespace {

// One all-to-all of a [d, ...] float tensor: block s goes to rank s; the
// result's block s came from rank s.
torch::Tensor exchange(const torch::Tensor& blocks, collective::Communicator& comm) {
  auto send = blocks.to(torch::kFloat32).contiguous();
  auto recv = torch::empty_like(send);
  comm.all_to_all(send.data_ptr(), recv.data_ptr(), size_t(send.numel() / send.size(0)) * sizeof(float));
  return recv;
}

void check_divides(int64_t n, int d, const char* what) {
  TORCH_CHECK(n % d == 0, "sequence parallel: ", what, " (", n, ") must divide by the degree ", d);
}

}  // namespace

torch::Tensor seq_to_heads(const torch::Tensor& t, collective::Communicator& comm) {
  const int d = comm.size();
  const auto B = t.size(0), H = t.size(1), n = t.size(2), dh = t.size(3);
  check_divides(H, d, "heads");
  // [B, H, n, dh] -> [d (head group = destination), B, H/d, n, dh]
  auto recv = exchange(t.view({B, d, H / d, n, dh}).permute({1, 0, 2, 3, 4}), comm);
  // [d (source = token block), B, H/d, n, dh] -> [B, H/d, d*n, dh]
  return recv.permute({1, 2, 0, 3, 4}).reshape({B, H / d, d * n, dh});
}

torch::Tensor heads_to_seq(const torch::Tensor& t, collective::Communicator& comm) {
  const int d = comm.size();
  const auto B = t.size(0), h = t.size(1), N = t.size(2), dh = t.size(3);
  check_divides(N, d, "tokens");
  // [B, h, N, dh] -> [d (token block = destination), B, h, N/d, dh]
  auto recv = exchange(t.reshape({B, h, d, N / d, dh}).permute({2, 0, 1, 3, 4}), comm);
  // [d (source = head group), B, h, n, dh] -> [B, d*h, n, dh]
  return recv.permute({1, 0, 2, 3, 4}).reshape({B, d * h, N / d, dh});
}

torch::Tensor gather_heads(const torch::Tensor& t, collective::Communicator& comm) {
  const int d = comm.size();
  auto mine = t.to(torch::kFloat32).contiguous();
  std::vector<int64_t> shape{d};
  shape.insert(shape.end(), mine.sizes().begin(), mine.sizes().end());
  auto all = torch::empty(shape, mine.options());
  comm.all_gather(mine.data_ptr(), all.data_ptr(), size_t(mine.numel()) * sizeof(float));
  // [d, B, h, L, dh] -> [B, d*h, L, dh]
  return all.permute({1, 0, 2, 3, 4}).reshape({t.size(0), d * t.size(1), t.size(2), t.size(3)});
}

torch::Tensor gather_tokens(const torch::Tensor& t, collective::Communicator& comm) {
  const int d = comm.size();
  auto mine = t.to(torch::kFloat32).contiguous();
  auto all = torch::empty({d, mine.size(0), mine.size(1), mine.size(2)}, mine.options());
  comm.all_gather(mine.data_ptr(), all.data_ptr(), size_t(mine.numel()) * sizeof(float));
  return all.permute({1, 0, 2, 3}).reshape({t.size(0), d * t.size(1), t.size(2)});
}

std::pair<torch::Tensor, torch::Tensor> ulysses_joint_attention(
    const torch::Tensor& qc, const torch::Tensor& kc, const torch::Tensor& vc, const torch::Tensor& qx,
    const torch::Tensor& kx, const torch::Tensor& vx, const torch::Tensor& key_mask, collective::Communicator& comm) {
  const int d = comm.size(), r = comm.rank();
  const auto H = qc.size(1), L = qc.size(2);
  check_divides(H, d, "heads");
  const auto h = H / d;
  auto mine = [&](const torch::Tensor& t) { return t.narrow(1, r * h, h); };  // this rank's heads of the text
  auto q = torch::cat({mine(qc), seq_to_heads(qx, comm)}, 2);
  auto k = torch::cat({mine(kc), seq_to_heads(kx, comm)}, 2);
  auto v = torch::cat({mine(vc), seq_to_heads(vx, comm)}, 2);
  auto out = attention(q, k, v, key_mask);  // [B, h, L + N, dh]
  auto out_c = gather_heads(out.narrow(2, 0, L), comm);
  auto out_x = heads_to_seq(out.narrow(2, L, out.size(2) - L), comm);
  return {out_c, out_x};
}

}  // namespace spotlight::models
