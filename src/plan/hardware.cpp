// See hardware.h. The reader is strict: an unknown field is an error (a typo must not silently leave a
// default in place), every number must be finite and in range, every curve sorted by x.
#include "src/plan/hardware.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <set>

#include "src/core/check.h"
#include "src/io/atomic_file.h"
#include "src/io/json_fields.h"
#include "src/io/json_min.h"

namespace gpt {

double RateCurve::at(double x) const {
  GPT_CHECK(!points.empty(), "time model: an empty rate curve was evaluated");
  if (points.size() == 1 || x <= points.front().first) return points.front().second;
  if (x >= points.back().first) return points.back().second;
  size_t i = 1;
  while (points[i].first < x) i++;
  const auto& [x0, y0] = points[i - 1];
  const auto& [x1, y1] = points[i];
  const double f = (std::log(x) - std::log(x0)) / (std::log(x1) - std::log(x0));
  return std::exp(std::log(y0) + f * (std::log(y1) - std::log(y0)));
}

RateCurve RateCurve::scaled(double factor) const {
  RateCurve c = *this;
  for (auto& p : c.points) p.second *= factor;
  return c;
}

double RateCurve::max_y() const {
  double m = 0;
  for (const auto& p : points) m = std::max(m, p.second);
  return m;
}

const char* intra_topology_name(IntraTopology t) {
  switch (t) {
    case IntraTopology::none: return "none";
    case IntraTopology::nvswitch: return "nvswitch";
    case IntraTopology::hybrid_cube_mesh: return "hybrid_cube_mesh";
  }
  return "?";
}

const std::vector<std::string>& kernel_families() {
  static const std::vector<std::string> k = {"layernorm_forward", "layernorm_backward", "gelu_forward", "gelu_backward",
                                             "classifier_forward", "classifier_backward", "adamw"};
  return k;
}

namespace {

// Reads one JSON object of a hardware file (src/io/json_fields.h), plus its rate curves.
class Obj : public JsonFields {
 public:
  using JsonFields::JsonFields;

  // A curve: a positive number (flat), or [[x, y], ...] with x > 0 increasing and y > 0.
  RateCurve curve(const std::string& key, bool required) {
    const JsonValue* v = required ? &need(key) : get(key);
    RateCurve c;
    if (!v) return c;
    const std::string path = field(key);
    if (v->kind == JsonValue::Kind::number) {
      c.points.push_back({1.0, number(*v, path, 1e-300, 1e300)});
      GPT_CHECK(c.points[0].second > 0, file(), ": field ", path, ": expected a positive number, got ", v->text);
      return c;
    }
    GPT_CHECK(v->kind == JsonValue::Kind::array && !v->items.empty(), file(), ": field ", path,
              ": expected a positive number or a non-empty array of [x, y] pairs, got ", v->kind_name());
    for (size_t i = 0; i < v->items.size(); i++) {
      const JsonValue& p = v->items[i];
      const std::string pp = str(path, "[", i, "]");
      GPT_CHECK(p.kind == JsonValue::Kind::array && p.items.size() == 2, file(), ": field ", pp,
                ": expected an [x, y] pair");
      const double x = number(p.items[0], pp + "[0]", 0, 1e300), y = number(p.items[1], pp + "[1]", 0, 1e300);
      GPT_CHECK(x > 0 && y > 0, file(), ": field ", pp, ": x and y must be positive, got [", x, ", ", y, "]");
      GPT_CHECK(c.points.empty() || x > c.points.back().first, file(), ": field ", pp,
                ": x must increase along the curve (", x, " after ", c.points.back().first, ")");
      c.points.push_back({x, y});
    }
    return c;
  }
};

Link read_link(Obj& o, const std::string& bw_key) {
  Link l;
  const double eff = o.num("efficiency", 1.0, 1e-6, 1.0);
  l.bandwidth = o.need_num(bw_key, 1e-300, 1e300) * eff;
  l.latency = o.num("latency_s", 0.0, 0.0, 1e3);
  o.finish();
  return l;
}

const char* kind_key(int i) { return i == 0 ? "all_gather" : i == 1 ? "reduce_scatter" : "all_reduce"; }

// profiles[i]: one rank count x thread count's rates (a gemm curve, or fractions of peak_flops on a gpu).
ComputeProfile read_profile(const JsonValue& v, size_t i, const std::string& file, double peak_flops) {
  Obj p(v, str("profiles[", i, "]"), file);
  ComputeProfile cp;
  cp.ranks = (int)p.num("ranks", 1, 1, 1 << 20);
  cp.threads = (int)p.num("threads", 1, 1, 1 << 20);
  const bool has_frac = p.get("gemm_fraction_of_peak") != nullptr;
  const bool has_gemm = p.get("gemm") != nullptr;
  GPT_CHECK(has_frac != has_gemm, file, ": field ", p.field("gemm"), ": give exactly one of gemm and gemm_fraction_of_peak");
  if (has_gemm) {
    cp.gemm = p.curve("gemm", true);
  } else {
    cp.gemm = p.curve("gemm_fraction_of_peak", true);
    for (size_t j = 0; j < cp.gemm.points.size(); j++)
      GPT_CHECK(cp.gemm.points[j].second <= 1.0, file, ": field ", p.field("gemm_fraction_of_peak"), "[", j,
                "][1]: a fraction of the peak must be <= 1, got ", cp.gemm.points[j].second);
    cp.gemm = cp.gemm.scaled(peak_flops);
  }
  cp.gemm_backward = p.curve("gemm_backward", false);
  if (cp.gemm_backward.empty()) cp.gemm_backward = cp.gemm;
  cp.has_gemm_edge = p.get("gemm_edge") != nullptr;
  cp.gemm_edge = p.num("gemm_edge", 0.0, 0.0, 1 << 20);
  cp.gemm_backward_edge = p.num("gemm_backward_edge", cp.gemm_edge, 0.0, 1 << 20);
  cp.gemm_tasks = p.curve("gemm_tasks", false);
  if (cp.gemm_tasks.empty()) cp.gemm_tasks = cp.gemm;
  cp.stream = p.curve("stream", true);
  cp.copy = p.curve("copy", false);
  if (cp.copy.empty()) cp.copy = cp.stream;
  if (const JsonValue* kv = p.get("kernels")) {
    Obj ko(*kv, p.field("kernels"), file);
    for (const std::string& fam : kernel_families()) {
      RateCurve c = ko.curve(fam, false);
      if (!c.empty()) cp.kernels[fam] = c;
    }
    ko.finish();
  }
  p.finish();
  return cp;
}

IntraTopology parse_topology(const std::string& name, const std::string& file) {
  if (name == "nvswitch") return IntraTopology::nvswitch;
  if (name == "hybrid_cube_mesh") return IntraTopology::hybrid_cube_mesh;
  fail(file, ": field network.intra_topology: expected \"nvswitch\" or \"hybrid_cube_mesh\", got \"", name, "\"");
}

// network.intra_topology and, for a hybrid cube mesh, network.intra_rings (hardware.h). Required in a gpu
// file, refused in a cpu file (its collectives are measured fits; there are no links to route rings over).
void read_topology(Obj& net, const std::string& file, HardwareSpec& h) {
  const JsonValue* tv = net.get("intra_topology");
  const JsonValue* rv = net.get("intra_rings");
  if (h.kind == "cpu") {
    GPT_CHECK(!tv && !rv, file, ": field network.", tv ? "intra_topology" : "intra_rings",
              ": a cpu file has no intra-node topology (its collectives are priced by measured fits)");
    return;
  }
  GPT_CHECK(tv, file, ": field network.intra_topology: missing (a gpu file states how its node's GPUs are wired: "
            "\"nvswitch\" or \"hybrid_cube_mesh\")");
  h.intra_topology = parse_topology(net.need_text("intra_topology"), file);
  if (h.intra_topology == IntraTopology::nvswitch) {
    GPT_CHECK(!rv, file, ": field network.intra_rings: an nvswitch node has one ring bandwidth (network.intra); "
              "intra_rings is for \"hybrid_cube_mesh\"");
    return;
  }
  GPT_CHECK(rv && rv->kind == JsonValue::Kind::array && !rv->items.empty(), file,
            ": field network.intra_rings: expected a non-empty array of {\"ranks\", \"bandwidth\"} (a hybrid cube mesh's "
            "ring bandwidth per group size), got ", rv ? rv->kind_name() : "nothing");
  for (size_t i = 0; i < rv->items.size(); i++) {
    Obj o(rv->items[i], str("network.intra_rings[", i, "]"), file);
    IntraRing r;
    r.ranks = (int)o.need_int("ranks", 2, h.devices_per_node);
    const double eff = o.num("efficiency", 1.0, 1e-6, 1.0);
    r.bandwidth = o.need_num("bandwidth", 1e-300, 1e300) * eff;
    o.finish();
    GPT_CHECK(h.intra_rings.empty() || r.ranks > h.intra_rings.back().ranks, file, ": field network.intra_rings[", i,
              "].ranks: the rings must be listed by increasing ranks (", r.ranks, " after ", h.intra_rings.back().ranks, ")");
    h.intra_rings.push_back(r);
  }
}

// network: overlap, devices per node, the intra- and inter-node links, the intra-node topology and the measured
// per-collective fits.
void read_network(const JsonValue& nv, const std::string& file, HardwareSpec& h) {
  Obj net(nv, "network", file);
  h.overlap = net.boolean("overlap", h.kind == "gpu");
  h.devices_per_node = (int)net.num("devices_per_node", h.kind == "gpu" ? 8 : 1 << 20, 1, 1 << 20);
  {
    Obj o(net.need("intra"), "network.intra", file);
    h.intra = read_link(o, "bandwidth");
  }
  if (const JsonValue* iv = net.get("inter")) {
    Obj o(*iv, "network.inter", file);
    h.inter = read_link(o, "bandwidth_per_node");
  } else {
    h.inter = h.intra;
  }
  read_topology(net, file, h);
  if (const JsonValue* mv = net.get("measured")) {
    GPT_CHECK(mv->kind == JsonValue::Kind::array, file, ": field network.measured: expected an array, got ",
              mv->kind_name());
    for (size_t i = 0; i < mv->items.size(); i++) {
      Obj m(mv->items[i], str("network.measured[", i, "]"), file);
      MeasuredNetwork mn;
      mn.ranks = (int)m.need_num("ranks", 2, 1 << 20);
      Link* links[3] = {&mn.links.all_gather, &mn.links.reduce_scatter, &mn.links.all_reduce};
      for (int k = 0; k < 3; k++) {
        Obj o(m.need(kind_key(k)), m.field(kind_key(k)), file);
        *links[k] = read_link(o, "bandwidth");
      }
      const JsonValue* rs16 = m.get("reduce_scatter_bf16");
      const JsonValue* ar16 = m.get("all_reduce_bf16");
      GPT_CHECK(!rs16 == !ar16, file, ": field network.measured[", i,
                "]: reduce_scatter_bf16 and all_reduce_bf16 come together (one is missing)");
      if (rs16) {
        Obj rs(*rs16, m.field("reduce_scatter_bf16"), file), ar(*ar16, m.field("all_reduce_bf16"), file);
        mn.reduce_scatter_bf16 = read_link(rs, "bandwidth");
        mn.all_reduce_bf16 = read_link(ar, "bandwidth");
        mn.has_bf16 = true;
      }
      m.finish();
      for (const MeasuredNetwork& q : h.measured)
        GPT_CHECK(q.ranks != mn.ranks, file, ": field network.measured[", i, "]: a second fit for ", mn.ranks, " ranks");
      h.measured.push_back(mn);
    }
  }
  net.finish();
}

}  // namespace

HardwareSpec parse_hardware(std::string_view json, const std::string& file) {
  const JsonValue root = parse_json(json, file);
  Obj top(root, "", file);
  HardwareSpec h;
  h.file = file;
  h.name = top.text("name", file);
  h.kind = top.text("kind", "cpu");
  GPT_CHECK(h.kind == "cpu" || h.kind == "gpu", file, ": field kind: expected \"cpu\" or \"gpu\", got \"", h.kind, "\"");
  const std::string dt = top.text("dtype", h.kind == "cpu" ? "fp32" : "bf16");
  GPT_CHECK(dt == "fp32" || dt == "bf16", file, ": field dtype: expected \"fp32\" or \"bf16\", got \"", dt, "\"");
  h.dtype = dt == "fp32" ? DType::F32 : DType::BF16;
  h.peak_flops = top.need_num("peak_flops", 1e-300, 1e300);
  h.memory_bytes = top.num("memory_bytes", 0.0, 0.0, 1e300);
  h.cores = (int)top.num("cores", 0, 0, 1 << 20);
  h.op_overhead = top.num("op_overhead_s", 0.0, 0.0, 1.0);
  h.sources = top.strings("sources");
  h.assumptions = top.strings("assumptions");
  h.notes = top.strings("notes");
  GPT_CHECK(!(h.kind == "cpu" && h.cores == 0), file, ": field cores: missing (a cpu file names the cores its ranks share)");

  const JsonValue& profs = top.need("profiles");
  GPT_CHECK(profs.kind == JsonValue::Kind::array && !profs.items.empty(), file,
            ": field profiles: expected a non-empty array of objects, got ", profs.kind_name());
  for (size_t i = 0; i < profs.items.size(); i++) {
    ComputeProfile cp = read_profile(profs.items[i], i, file, h.peak_flops);
    for (const ComputeProfile& q : h.profiles)
      GPT_CHECK(q.ranks != cp.ranks || q.threads != cp.threads, file, ": field profiles[", i, "]: a second profile for ",
                cp.ranks, " ranks x ", cp.threads, " threads");
    h.profiles.push_back(cp);
  }

  if (const JsonValue* hv = top.get("host")) {
    Obj o(*hv, "host", file);
    h.host_bandwidth = o.need_num("bandwidth", 1e-300, 1e300);
    h.pcie_bandwidth = o.need_num("pcie", 1e-300, 1e300);
    o.finish();
  } else {
    GPT_CHECK(h.kind == "cpu", file, ": field host: missing (a gpu file gives host.bandwidth and host.pcie)");
  }
  if (h.kind == "cpu") {  // host and device are the same memory; copies run at the copy curve
    if (h.host_bandwidth == 0) h.host_bandwidth = h.profiles[0].stream.max_y();
    if (h.pcie_bandwidth == 0) h.pcie_bandwidth = h.profiles[0].copy.max_y();
  }

  read_network(top.need("network"), file, h);
  top.finish();
  return h;
}

HardwareSpec load_hardware(const std::string& path) {
  std::string text;
  try {
    text = read_file(path);
  } catch (const Error& e) {
    fail("--hardware ", path, ": cannot read the file (", e.what(), ")");
  }
  return parse_hardware(text, path);
}

namespace {

std::string num(double x) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.6g", x);
  return buf;
}

std::string curve_json(const RateCurve& c) {
  std::string s = "[";
  for (size_t i = 0; i < c.points.size(); i++)
    s += str(i ? ", " : "", "[", num(c.points[i].first), ", ", num(c.points[i].second), "]");
  return s + "]";
}

std::string strings_json(const std::vector<std::string>& v, const char* indent) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); i++) s += str(i ? ",\n" : "\n", indent, "  ", json_quote(v[i]));
  return s + (v.empty() ? "]" : str("\n", indent, "]"));
}

std::string link_json(const Link& l, const char* bw_key) {
  return str("{\"", bw_key, "\": ", num(l.bandwidth), ", \"latency_s\": ", num(l.latency), "}");
}

}  // namespace

std::string hardware_to_json(const HardwareSpec& h) {
  std::string s = "{\n";
  s += str("  \"name\": ", json_quote(h.name), ",\n  \"kind\": ", json_quote(h.kind), ",\n  \"dtype\": \"",
           h.dtype == DType::F32 ? "fp32" : "bf16", "\",\n  \"peak_flops\": ", num(h.peak_flops), ",\n");
  if (h.memory_bytes > 0) s += str("  \"memory_bytes\": ", num(h.memory_bytes), ",\n");
  if (h.cores > 0) s += str("  \"cores\": ", h.cores, ",\n");
  if (h.op_overhead > 0) s += str("  \"op_overhead_s\": ", num(h.op_overhead), ",\n");
  s += "  \"profiles\": [";
  for (size_t i = 0; i < h.profiles.size(); i++) {
    const ComputeProfile& p = h.profiles[i];
    s += str(i ? ",\n" : "\n", "    {\"ranks\": ", p.ranks, ", \"threads\": ", p.threads, ",\n     \"gemm\": ",
             curve_json(p.gemm), ",\n     \"gemm_backward\": ", curve_json(p.gemm_backward),
             p.has_gemm_edge || p.gemm_edge > 0 || p.gemm_backward_edge > 0
                 ? str(",\n     \"gemm_edge\": ", num(p.gemm_edge), ", \"gemm_backward_edge\": ", num(p.gemm_backward_edge))
                 : std::string(),
             ",\n     \"gemm_tasks\": ", curve_json(p.gemm_tasks), ",\n     \"stream\": ", curve_json(p.stream),
             ",\n     \"copy\": ", curve_json(p.copy));
    if (!p.kernels.empty()) {
      s += ",\n     \"kernels\": {";
      bool first = true;
      for (const auto& [fam, c] : p.kernels) {
        s += str(first ? "" : ",", "\n       \"", fam, "\": ", curve_json(c));
        first = false;
      }
      s += "}";
    }
    s += "}";
  }
  s += "\n  ],\n";
  s += str("  \"host\": {\"bandwidth\": ", num(h.host_bandwidth), ", \"pcie\": ", num(h.pcie_bandwidth), "},\n");
  s += str("  \"network\": {\n    \"overlap\": ", h.overlap ? "true" : "false", ",\n    \"devices_per_node\": ",
           h.devices_per_node, ",\n    \"intra\": ", link_json(h.intra, "bandwidth"), ",\n    \"inter\": ",
           link_json(h.inter, "bandwidth_per_node"));
  if (h.intra_topology != IntraTopology::none)
    s += str(",\n    \"intra_topology\": \"", intra_topology_name(h.intra_topology), "\"");
  for (size_t i = 0; i < h.intra_rings.size(); i++)
    s += str(i ? ",\n      " : ",\n    \"intra_rings\": [\n      ", "{\"ranks\": ", h.intra_rings[i].ranks,
             ", \"bandwidth\": ", num(h.intra_rings[i].bandwidth), "}", i + 1 == h.intra_rings.size() ? "\n    ]" : "");
  if (!h.measured.empty()) {
    s += ",\n    \"measured\": [";
    for (size_t i = 0; i < h.measured.size(); i++) {
      const MeasuredNetwork& m = h.measured[i];
      s += str(i ? "," : "", "\n      {\"ranks\": ", m.ranks, ", \"all_gather\": ", link_json(m.links.all_gather, "bandwidth"),
               ",\n       \"reduce_scatter\": ", link_json(m.links.reduce_scatter, "bandwidth"),
               ",\n       \"all_reduce\": ", link_json(m.links.all_reduce, "bandwidth"));
      if (m.has_bf16)
        s += str(",\n       \"reduce_scatter_bf16\": ", link_json(m.reduce_scatter_bf16, "bandwidth"),
                 ",\n       \"all_reduce_bf16\": ", link_json(m.all_reduce_bf16, "bandwidth"));
      s += "}";
    }
    s += "\n    ]";
  }
  s += "\n  },\n";
  s += str("  \"sources\": ", strings_json(h.sources, "  "), ",\n  \"assumptions\": ", strings_json(h.assumptions, "  "),
           ",\n  \"notes\": ", strings_json(h.notes, "  "), "\n}\n");
  return s;
}

}  // namespace gpt
