// See mesh.h.
#include "src/dist/mesh.h"

#include "src/core/check.h"

namespace gpt {

Mesh make_mesh(Communicator& world, int tp) {
  GPT_CHECK(tp >= 1 && world.world() % tp == 0, "mesh: a tensor-parallel group of ", tp, " does not divide ",
            world.world(), " ranks");
  Mesh m;
  m.tp = world.split_contiguous(tp);
  m.dp = world.split_strided(tp);
  return m;
}

}  // namespace gpt
