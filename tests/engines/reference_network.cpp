#include "reference_network.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace crossbench::testing {
namespace {

using Vec = std::vector<double>;

struct Shape {
  std::int64_t n, c, h, w;
  std::int64_t size() const { return n * c * h * w; }
  std::int64_t at(std::int64_t in, std::int64_t ic, std::int64_t y, std::int64_t x) const {
    return ((in * c + ic) * h + y) * w + x;
  }
};

Vec to_double(const std::vector<float>& v) { return Vec(v.begin(), v.end()); }

// PyTorch's pooling window along one axis: [start, end) clipped to the input,
// and the divisor of count_include_pad=True (the window clipped to the padded input).
struct Window {
  std::int64_t begin, end, padded_count;
};
Window window(std::int64_t o, std::int64_t stride, std::int64_t padding, std::int64_t kernel, std::int64_t in) {
  std::int64_t start = o * stride - padding;
  std::int64_t end = std::min(start + kernel, in + padding);
  const std::int64_t padded = end - start;
  return {std::max<std::int64_t>(start, 0), std::min(end, in), padded};
}

}  // namespace

ReferenceResult run_reference(const Network& network, std::int64_t batch, std::uint64_t seed, bool training,
                              std::uint64_t step) {
  const auto& layers = network.layers();
  const int count = static_cast<int>(layers.size());
  auto shape = [&](int l) {
    const auto& s = layers[static_cast<std::size_t>(l)].output;
    return Shape{batch, s.channels, s.height, s.width};
  };
  ReferenceResult r;
  r.outputs.resize(static_cast<std::size_t>(count));
  r.gradients.resize(static_cast<std::size_t>(count));
  std::vector<int> param_index(static_cast<std::size_t>(count) * 4, -1);
  auto param = [&](int l, synthetic::Slot slot) -> ReferenceParameter& {
    return r.parameters[static_cast<std::size_t>(param_index[static_cast<std::size_t>(l) * 4 + static_cast<int>(slot)])];
  };
  for (int l = 0; l < count; ++l)
    for (auto slot : {synthetic::Slot::weight, synthetic::Slot::bias, synthetic::Slot::bn_gamma, synthetic::Slot::bn_beta})
      if (synthetic::parameter_elements(network, l, slot) > 0) {
        Vec value = to_double(synthetic::parameter(network, l, slot, seed));
        param_index[static_cast<std::size_t>(l) * 4 + static_cast<int>(slot)] = static_cast<int>(r.parameters.size());
        r.parameters.push_back({l, slot, value, Vec(value.size(), 0.0)});
      }
  // Batch-norm statistics, kept for backward.
  std::vector<Vec> bn_mean(static_cast<std::size_t>(count)), bn_var(static_cast<std::size_t>(count));
  const std::vector<std::int32_t> labels = synthetic::labels(network, batch, seed);

  // ---- forward ----
  r.outputs[0] = to_double(synthetic::input(network, batch, seed));
  int loss_layer = count - 1;
  for (int l = 1; l < loss_layer; ++l) {
    const Layer& L = layers[static_cast<std::size_t>(l)];
    const auto& p = L.params;
    const Shape o = shape(l);
    Vec& y = r.outputs[static_cast<std::size_t>(l)];
    y.assign(static_cast<std::size_t>(o.size()), 0.0);
    const int a = L.inputs.front();
    const Shape i = shape(a);
    const Vec& x = r.outputs[static_cast<std::size_t>(a)];
    switch (L.kind) {
      case LayerKind::convolution: {
        const Vec& w = param(l, synthetic::Slot::weight).value;
        for (std::int64_t n = 0; n < o.n; ++n)
          for (std::int64_t oc = 0; oc < o.c; ++oc)
            for (std::int64_t oy = 0; oy < o.h; ++oy)
              for (std::int64_t ox = 0; ox < o.w; ++ox) {
                double sum = p.bias ? param(l, synthetic::Slot::bias).value[static_cast<std::size_t>(oc)] : 0.0;
                for (std::int64_t ic = 0; ic < i.c; ++ic)
                  for (std::int64_t ky = 0; ky < p.kernel; ++ky)
                    for (std::int64_t kx = 0; kx < p.kernel; ++kx) {
                      const std::int64_t iy = oy * p.stride - p.padding + ky, ix = ox * p.stride - p.padding + kx;
                      if (iy < 0 || iy >= i.h || ix < 0 || ix >= i.w) continue;
                      sum += w[static_cast<std::size_t>(((oc * i.c + ic) * p.kernel + ky) * p.kernel + kx)] *
                             x[static_cast<std::size_t>(i.at(n, ic, iy, ix))];
                    }
                y[static_cast<std::size_t>(o.at(n, oc, oy, ox))] = sum;
              }
        break;
      }
      case LayerKind::max_pool:
      case LayerKind::avg_pool:
        for (std::int64_t n = 0; n < o.n; ++n)
          for (std::int64_t c = 0; c < o.c; ++c)
            for (std::int64_t oy = 0; oy < o.h; ++oy)
              for (std::int64_t ox = 0; ox < o.w; ++ox) {
                const Window wy = window(oy, p.stride, p.padding, p.kernel, i.h);
                const Window wx = window(ox, p.stride, p.padding, p.kernel, i.w);
                double value = L.kind == LayerKind::max_pool ? -std::numeric_limits<double>::infinity() : 0.0;
                for (std::int64_t iy = wy.begin; iy < wy.end; ++iy)
                  for (std::int64_t ix = wx.begin; ix < wx.end; ++ix) {
                    const double v = x[static_cast<std::size_t>(i.at(n, c, iy, ix))];
                    value = L.kind == LayerKind::max_pool ? std::max(value, v) : value + v;
                  }
                if (L.kind == LayerKind::avg_pool) value /= static_cast<double>(wy.padded_count * wx.padded_count);
                y[static_cast<std::size_t>(o.at(n, c, oy, ox))] = value;
              }
        break;
      case LayerKind::lrn: {
        const std::int64_t before = p.lrn_size / 2, after = (p.lrn_size - 1) / 2;
        for (std::int64_t n = 0; n < o.n; ++n)
          for (std::int64_t c = 0; c < o.c; ++c)
            for (std::int64_t yy = 0; yy < o.h; ++yy)
              for (std::int64_t xx = 0; xx < o.w; ++xx) {
                double sum = 0;
                for (std::int64_t j = std::max<std::int64_t>(0, c - before); j <= std::min(o.c - 1, c + after); ++j) {
                  const double v = x[static_cast<std::size_t>(i.at(n, j, yy, xx))];
                  sum += v * v;
                }
                const double s = p.lrn_k + p.lrn_alpha / static_cast<double>(p.lrn_size) * sum;
                y[static_cast<std::size_t>(o.at(n, c, yy, xx))] = x[static_cast<std::size_t>(i.at(n, c, yy, xx))] * std::pow(s, -p.lrn_beta);
              }
        break;
      }
      case LayerKind::relu:
        for (std::size_t k = 0; k < y.size(); ++k) y[k] = std::max(0.0, x[k]);
        break;
      case LayerKind::batch_norm: {
        const Vec& gamma = param(l, synthetic::Slot::bn_gamma).value;
        const Vec& beta = param(l, synthetic::Slot::bn_beta).value;
        Vec mean(static_cast<std::size_t>(o.c), 0.0), var(static_cast<std::size_t>(o.c), 1.0);
        const double m = static_cast<double>(o.n * o.h * o.w);
        if (training)
          for (std::int64_t c = 0; c < o.c; ++c) {
            double s = 0, s2 = 0;
            for (std::int64_t n = 0; n < o.n; ++n)
              for (std::int64_t k = 0; k < o.h * o.w; ++k) s += x[static_cast<std::size_t>(i.at(n, c, 0, 0) + k)];
            const double mu = s / m;
            for (std::int64_t n = 0; n < o.n; ++n)
              for (std::int64_t k = 0; k < o.h * o.w; ++k) {
                const double d = x[static_cast<std::size_t>(i.at(n, c, 0, 0) + k)] - mu;
                s2 += d * d;
              }
            mean[static_cast<std::size_t>(c)] = mu;
            var[static_cast<std::size_t>(c)] = s2 / m;
          }
        for (std::int64_t n = 0; n < o.n; ++n)
          for (std::int64_t c = 0; c < o.c; ++c)
            for (std::int64_t k = 0; k < o.h * o.w; ++k) {
              const auto at = static_cast<std::size_t>(i.at(n, c, 0, 0) + k);
              const auto cc = static_cast<std::size_t>(c);
              y[at] = gamma[cc] * (x[at] - mean[cc]) / std::sqrt(var[cc] + p.bn_epsilon) + beta[cc];
            }
        bn_mean[static_cast<std::size_t>(l)] = mean;
        bn_var[static_cast<std::size_t>(l)] = var;
        break;
      }
      case LayerKind::dropout:
        for (std::size_t k = 0; k < y.size(); ++k)
          y[k] = !training ? x[k]
                           : (synthetic::dropout_keep(seed, l, step, k, p.dropout_rate)
                                  ? x[k] * static_cast<double>(static_cast<float>(1.0 / (1.0 - p.dropout_rate)))
                                  : 0.0);
        break;
      case LayerKind::concat: {
        std::int64_t offset = 0;
        for (int from : L.inputs) {
          const Shape s = shape(from);
          const Vec& v = r.outputs[static_cast<std::size_t>(from)];
          for (std::int64_t n = 0; n < s.n; ++n)
            for (std::int64_t c = 0; c < s.c; ++c)
              for (std::int64_t k = 0; k < s.h * s.w; ++k)
                y[static_cast<std::size_t>(o.at(n, offset + c, 0, 0) + k)] = v[static_cast<std::size_t>(s.at(n, c, 0, 0) + k)];
          offset += s.c;
        }
        break;
      }
      case LayerKind::add: {
        const Vec& b = r.outputs[static_cast<std::size_t>(L.inputs[1])];
        for (std::size_t k = 0; k < y.size(); ++k) y[k] = x[k] + b[k];
        break;
      }
      case LayerKind::fully_connected: {
        const Vec& w = param(l, synthetic::Slot::weight).value;
        const std::int64_t in = i.c * i.h * i.w;
        for (std::int64_t n = 0; n < o.n; ++n)
          for (std::int64_t f = 0; f < o.c; ++f) {
            double sum = p.bias ? param(l, synthetic::Slot::bias).value[static_cast<std::size_t>(f)] : 0.0;
            for (std::int64_t k = 0; k < in; ++k) sum += w[static_cast<std::size_t>(f * in + k)] * x[static_cast<std::size_t>(n * in + k)];
            y[static_cast<std::size_t>(n * o.c + f)] = sum;
          }
        break;
      }
      case LayerKind::flatten:
        y = x;
        break;
      default:
        throw std::logic_error("reference: unexpected layer kind");
    }
  }

  // ---- loss ----
  const int logits_layer = layers[static_cast<std::size_t>(loss_layer)].inputs.front();
  const Vec& z = r.outputs[static_cast<std::size_t>(logits_layer)];
  const std::int64_t classes = layers[static_cast<std::size_t>(logits_layer)].output.elements();
  Vec dz(z.size(), 0.0);
  for (std::int64_t n = 0; n < batch; ++n) {
    double largest = -std::numeric_limits<double>::infinity();
    for (std::int64_t k = 0; k < classes; ++k) largest = std::max(largest, z[static_cast<std::size_t>(n * classes + k)]);
    double sum = 0;
    for (std::int64_t k = 0; k < classes; ++k) sum += std::exp(z[static_cast<std::size_t>(n * classes + k)] - largest);
    const std::int64_t label = labels[static_cast<std::size_t>(n)];
    r.loss += (largest + std::log(sum) - z[static_cast<std::size_t>(n * classes + label)]) / static_cast<double>(batch);
    for (std::int64_t k = 0; k < classes; ++k)
      dz[static_cast<std::size_t>(n * classes + k)] =
          (std::exp(z[static_cast<std::size_t>(n * classes + k)] - largest) / sum - (k == label ? 1.0 : 0.0)) /
          static_cast<double>(batch);
  }
  for (double v : z) r.logits_checksum += v;
  if (!training) return r;

  // ---- backward ----
  for (int l = 0; l < loss_layer; ++l) r.gradients[static_cast<std::size_t>(l)].assign(r.outputs[static_cast<std::size_t>(l)].size(), 0.0);
  r.gradients[static_cast<std::size_t>(logits_layer)] = dz;
  for (int l = loss_layer - 1; l >= 1; --l) {
    const Layer& L = layers[static_cast<std::size_t>(l)];
    const auto& p = L.params;
    const Shape o = shape(l);
    const Vec& g = r.gradients[static_cast<std::size_t>(l)];
    const int a = L.inputs.front();
    const Shape i = shape(a);
    const Vec& x = r.outputs[static_cast<std::size_t>(a)];
    const Vec& y = r.outputs[static_cast<std::size_t>(l)];
    Vec& dx = r.gradients[static_cast<std::size_t>(a)];
    switch (L.kind) {
      case LayerKind::convolution: {
        const Vec& w = param(l, synthetic::Slot::weight).value;
        Vec& dw = param(l, synthetic::Slot::weight).gradient;
        for (std::int64_t n = 0; n < o.n; ++n)
          for (std::int64_t oc = 0; oc < o.c; ++oc)
            for (std::int64_t oy = 0; oy < o.h; ++oy)
              for (std::int64_t ox = 0; ox < o.w; ++ox) {
                const double go = g[static_cast<std::size_t>(o.at(n, oc, oy, ox))];
                if (p.bias) param(l, synthetic::Slot::bias).gradient[static_cast<std::size_t>(oc)] += go;
                for (std::int64_t ic = 0; ic < i.c; ++ic)
                  for (std::int64_t ky = 0; ky < p.kernel; ++ky)
                    for (std::int64_t kx = 0; kx < p.kernel; ++kx) {
                      const std::int64_t iy = oy * p.stride - p.padding + ky, ix = ox * p.stride - p.padding + kx;
                      if (iy < 0 || iy >= i.h || ix < 0 || ix >= i.w) continue;
                      const auto wi = static_cast<std::size_t>(((oc * i.c + ic) * p.kernel + ky) * p.kernel + kx);
                      const auto xi = static_cast<std::size_t>(i.at(n, ic, iy, ix));
                      dw[wi] += go * x[xi];
                      dx[xi] += go * w[wi];
                    }
              }
        break;
      }
      case LayerKind::max_pool:
      case LayerKind::avg_pool:
        for (std::int64_t n = 0; n < o.n; ++n)
          for (std::int64_t c = 0; c < o.c; ++c)
            for (std::int64_t oy = 0; oy < o.h; ++oy)
              for (std::int64_t ox = 0; ox < o.w; ++ox) {
                const Window wy = window(oy, p.stride, p.padding, p.kernel, i.h);
                const Window wx = window(ox, p.stride, p.padding, p.kernel, i.w);
                const double go = g[static_cast<std::size_t>(o.at(n, c, oy, ox))];
                if (L.kind == LayerKind::avg_pool) {
                  const double share = go / static_cast<double>(wy.padded_count * wx.padded_count);
                  for (std::int64_t iy = wy.begin; iy < wy.end; ++iy)
                    for (std::int64_t ix = wx.begin; ix < wx.end; ++ix) dx[static_cast<std::size_t>(i.at(n, c, iy, ix))] += share;
                } else {
                  std::int64_t best = -1;  // first maximum in row-major order
                  for (std::int64_t iy = wy.begin; iy < wy.end; ++iy)
                    for (std::int64_t ix = wx.begin; ix < wx.end; ++ix) {
                      const std::int64_t at = i.at(n, c, iy, ix);
                      if (best < 0 || x[static_cast<std::size_t>(at)] > x[static_cast<std::size_t>(best)]) best = at;
                    }
                  dx[static_cast<std::size_t>(best)] += go;
                }
              }
        break;
      case LayerKind::lrn: {
        const std::int64_t before = p.lrn_size / 2, after = (p.lrn_size - 1) / 2;
        const double scale = p.lrn_alpha / static_cast<double>(p.lrn_size);
        for (std::int64_t n = 0; n < o.n; ++n)
          for (std::int64_t yy = 0; yy < o.h; ++yy)
            for (std::int64_t xx = 0; xx < o.w; ++xx) {
              Vec s(static_cast<std::size_t>(o.c));
              for (std::int64_t c = 0; c < o.c; ++c) {
                double sum = 0;
                for (std::int64_t j = std::max<std::int64_t>(0, c - before); j <= std::min(o.c - 1, c + after); ++j) {
                  const double v = x[static_cast<std::size_t>(i.at(n, j, yy, xx))];
                  sum += v * v;
                }
                s[static_cast<std::size_t>(c)] = p.lrn_k + scale * sum;
              }
              for (std::int64_t c = 0; c < o.c; ++c) {
                const auto at = static_cast<std::size_t>(i.at(n, c, yy, xx));
                const double xc = x[at], sc = s[static_cast<std::size_t>(c)];
                dx[at] += g[at] * std::pow(sc, -p.lrn_beta);
                // Channel c sits in the windows of channels j with c in [j - before, j + after].
                for (std::int64_t j = std::max<std::int64_t>(0, c - after); j <= std::min(o.c - 1, c + before); ++j) {
                  const auto aj = static_cast<std::size_t>(i.at(n, j, yy, xx));
                  dx[at] -= g[aj] * x[aj] * 2 * scale * p.lrn_beta * xc * std::pow(s[static_cast<std::size_t>(j)], -p.lrn_beta - 1);
                }
              }
            }
        break;
      }
      case LayerKind::relu:
        for (std::size_t k = 0; k < g.size(); ++k) dx[k] += x[k] > 0 ? g[k] : 0.0;
        break;
      case LayerKind::batch_norm: {
        const Vec& gamma = param(l, synthetic::Slot::bn_gamma).value;
        Vec& dgamma = param(l, synthetic::Slot::bn_gamma).gradient;
        Vec& dbeta = param(l, synthetic::Slot::bn_beta).gradient;
        const double m = static_cast<double>(o.n * o.h * o.w);
        for (std::int64_t c = 0; c < o.c; ++c) {
          const auto cc = static_cast<std::size_t>(c);
          const double inv = 1.0 / std::sqrt(bn_var[static_cast<std::size_t>(l)][cc] + p.bn_epsilon);
          const double mu = bn_mean[static_cast<std::size_t>(l)][cc];
          double sum_g = 0, sum_gx = 0;
          for (std::int64_t n = 0; n < o.n; ++n)
            for (std::int64_t k = 0; k < o.h * o.w; ++k) {
              const auto at = static_cast<std::size_t>(i.at(n, c, 0, 0) + k);
              sum_g += g[at];
              sum_gx += g[at] * (x[at] - mu) * inv;
            }
          dgamma[cc] += sum_gx;
          dbeta[cc] += sum_g;
          for (std::int64_t n = 0; n < o.n; ++n)
            for (std::int64_t k = 0; k < o.h * o.w; ++k) {
              const auto at = static_cast<std::size_t>(i.at(n, c, 0, 0) + k);
              const double xhat = (x[at] - mu) * inv;
              dx[at] += gamma[cc] * inv * (g[at] - sum_g / m - xhat * sum_gx / m);
            }
        }
        break;
      }
      case LayerKind::dropout:
        for (std::size_t k = 0; k < g.size(); ++k)
          dx[k] += synthetic::dropout_keep(seed, l, step, k, p.dropout_rate)
                       ? g[k] * static_cast<double>(static_cast<float>(1.0 / (1.0 - p.dropout_rate)))
                       : 0.0;
        break;
      case LayerKind::concat: {
        std::int64_t offset = 0;
        for (int from : L.inputs) {
          const Shape s = shape(from);
          Vec& d = r.gradients[static_cast<std::size_t>(from)];
          for (std::int64_t n = 0; n < s.n; ++n)
            for (std::int64_t c = 0; c < s.c; ++c)
              for (std::int64_t k = 0; k < s.h * s.w; ++k)
                d[static_cast<std::size_t>(s.at(n, c, 0, 0) + k)] += g[static_cast<std::size_t>(o.at(n, offset + c, 0, 0) + k)];
          offset += s.c;
        }
        break;
      }
      case LayerKind::add: {
        Vec& db = r.gradients[static_cast<std::size_t>(L.inputs[1])];
        for (std::size_t k = 0; k < g.size(); ++k) dx[k] += g[k];
        for (std::size_t k = 0; k < g.size(); ++k) db[k] += g[k];
        break;
      }
      case LayerKind::fully_connected: {
        const Vec& w = param(l, synthetic::Slot::weight).value;
        Vec& dw = param(l, synthetic::Slot::weight).gradient;
        const std::int64_t in = i.c * i.h * i.w;
        for (std::int64_t n = 0; n < o.n; ++n)
          for (std::int64_t f = 0; f < o.c; ++f) {
            const double go = g[static_cast<std::size_t>(n * o.c + f)];
            if (p.bias) param(l, synthetic::Slot::bias).gradient[static_cast<std::size_t>(f)] += go;
            for (std::int64_t k = 0; k < in; ++k) {
              dw[static_cast<std::size_t>(f * in + k)] += go * x[static_cast<std::size_t>(n * in + k)];
              dx[static_cast<std::size_t>(n * in + k)] += go * w[static_cast<std::size_t>(f * in + k)];
            }
          }
        break;
      }
      case LayerKind::flatten:
        for (std::size_t k = 0; k < g.size(); ++k) dx[k] += g[k];
        break;
      default:
        break;
    }
    (void)y;
  }
  return r;
}

}  // namespace crossbench::testing
