// See whole_model.h.
#include "src/train/whole_model.h"

namespace gpt {

std::vector<std::vector<float>> whole_model_units(Backend& be, ShardingEngine& engine, GPT& model) {
  const Layout& layout = model.layout();
  std::vector<std::vector<float>> units;  // [unit] this rank's slice, whole over the data-parallel ranks
  for (int u = 0; u < layout.num_units(); u++) units.push_back(engine.gather_unit_to_host(u));
  TensorParallel* tp = model.tensor_parallel();
  if (!tp) return units;
  const int T = tp->size();
  const Layout whole(layout.config(), layout.wrap());
  std::vector<std::vector<float>> out;  // [unit of whole] (numel) fp32
  std::vector<float*> dst;
  for (int u = 0; u < whole.num_units(); u++) out.emplace_back((size_t)whole.unit(u).numel, 0.0f);
  for (auto& v : out) dst.push_back(v.data());
  for (int u = 0; u < layout.num_units(); u++) {
    const int64_t n = layout.unit(u).numel;
    const UnitGeometry all{n * T, n * T, n, tp->rank() * n};  // the group's slices, one after another
    const std::vector<float> slices = gather_shards_to_host(be, tp->group(), all, units[u], layout.unit(u).name);
    for (int r = 0; r < T; r++)
      scatter_unit(Layout(layout.config(), layout.wrap(), TpShape{T, r}), u, slices.data() + r * n, whole, dst);
  }
  return out;
}

}  // namespace gpt
