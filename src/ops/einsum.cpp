// einsum: PyTorch's equation format (letters, one `...` per operand, implicit
// or explicit output). A composite of differentiable ops, so autograd and the
// Meta device come from its parts:
//   1. each operand's repeated subscripts become a diagonal, and subscripts
//      that no other operand and not the output use are summed out at once;
//   2. operands are contracted two at a time (a given path, or greedily: the
//      pair whose result grows storage least, then the fewest multiply-adds,
//      as opt_einsum's greedy order does), each contraction one batched
//      GEMM through bmm (permute/reshape into (batch, m, k) x (batch, k, n)),
//      or a broadcast multiply when nothing is summed;
//   3. what is left is summed over the dropped subscripts and permuted into
//      the output's order.
#include <algorithm>
#include <array>
#include <limits>

#include "ops/api/misc_more.h"
#include "ops/ops.h"

namespace strata {

namespace {

constexpr int kLetters = 52;  // 'A'-'Z' are labels 0-25, 'a'-'z' 26-51 (torch's order for the implicit output)

int letter_label(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return 26 + (c - 'a');
  return -1;
}
char label_char(int l) { return static_cast<char>(l < 26 ? 'A' + l : 'a' + (l - 26)); }

// One operand while the contraction runs: a tensor whose dims carry labels.
// Labels >= kLetters stand for ellipsis dims (kLetters + position in the
// broadcast ellipsis, aligned to the right).
struct Term {
  Tensor t;
  std::vector<int> labels;
};

struct Parsed {
  std::vector<std::vector<int>> inputs;  // labels per operand dim
  std::vector<int> output;
  int64_t ellipsis_dims = 0;
};

Parsed parse(std::string_view equation, TensorList ops) {
  std::string eq;
  for (char c : equation)
    if (c != ' ') eq += c;
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  Parsed p;
  // Split the left side into terms; count and check subscripts.
  std::vector<std::string> terms;
  {
    size_t start = 0;
    for (;;) {
      size_t comma = lhs.find(',', start);
      terms.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  STRATA_CHECK(!ops.empty(), "einsum(): must provide at least one operand");
  STRATA_CHECK(terms.size() <= ops.size(), "einsum(): fewer operands were provided than specified in the equation");
  STRATA_CHECK(terms.size() >= ops.size(), "einsum(): more operands were provided than specified in the equation");
  std::vector<bool> has_ell(terms.size(), false);
  std::vector<std::vector<int>> letters(terms.size());
  size_t pos = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    const std::string& term = terms[i];
    for (size_t j = 0; j < term.size(); ++j) {
      const char c = term[j];
      if (c == '.') {
        STRATA_CHECK(!has_ell[i] && term.compare(j, 3, "...") == 0, "einsum(): found '.' for operand ", i,
                     " that is not part of any ellipsis");
        has_ell[i] = true;
        letters[i].push_back(-1);  // placeholder for the ellipsis
        j += 2;
        continue;
      }
      const int l = letter_label(c);
      STRATA_CHECK(l >= 0, "einsum(): invalid subscript given at index ", pos + j,
                   " in the equation string, subscripts must be in [a-zA-Z]");
      letters[i].push_back(l);
    }
    pos += term.size() + 1;
  }
  // Number of dims each ellipsis covers, and the broadcast ellipsis rank.
  std::vector<int64_t> ell_dims(terms.size(), 0);
  for (size_t i = 0; i < terms.size(); ++i) {
    const int64_t n_letters = static_cast<int64_t>(letters[i].size()) - (has_ell[i] ? 1 : 0);
    const int64_t nd = ops[i].dim();
    if (has_ell[i]) {
      STRATA_CHECK(nd >= n_letters, "einsum(): the number of subscripts in the equation (", n_letters,
                   ") is more than the number of dimensions (", nd, ") for operand ", i);
      ell_dims[i] = nd - n_letters;
    } else {
      STRATA_CHECK(nd == n_letters, "einsum(): the number of subscripts in the equation (", n_letters,
                   ") does not match the number of dimensions (", nd, ") for operand ", i,
                   " and no ellipsis was given");
    }
    p.ellipsis_dims = std::max(p.ellipsis_dims, ell_dims[i]);
  }
  std::array<int, kLetters> count{};
  for (size_t i = 0; i < terms.size(); ++i) {
    std::vector<int> ls;
    for (int l : letters[i]) {
      if (l >= 0) {
        ls.push_back(l);
        ++count[l];
      } else {
        for (int64_t e = p.ellipsis_dims - ell_dims[i]; e < p.ellipsis_dims; ++e) ls.push_back(kLetters + int(e));
      }
    }
    p.inputs.push_back(std::move(ls));
  }
  if (arrow == std::string::npos) {
    // Implicit output: the ellipsis dims, then every subscript used exactly once, in label order.
    for (int64_t e = 0; e < p.ellipsis_dims; ++e) p.output.push_back(kLetters + int(e));
    for (int l = 0; l < kLetters; ++l)
      if (count[l] == 1) p.output.push_back(l);
    return p;
  }
  const std::string rhs = eq.substr(arrow + 2);
  std::array<bool, kLetters> seen{};
  bool out_ell = false;
  for (size_t j = 0; j < rhs.size(); ++j) {
    const char c = rhs[j];
    if (c == '.') {
      STRATA_CHECK(!out_ell && rhs.compare(j, 3, "...") == 0,
                   "einsum(): found '.' for output but it is not part of any ellipsis (...)");
      out_ell = true;
      for (int64_t e = 0; e < p.ellipsis_dims; ++e) p.output.push_back(kLetters + int(e));
      j += 2;
      continue;
    }
    const int l = letter_label(c);
    STRATA_CHECK(l >= 0, "einsum(): invalid subscript given at index ", lhs.size() + 2 + j,
                 " in the equation string, subscripts must be in [a-zA-Z]");
    STRATA_CHECK(!seen[l], "einsum(): output subscript ", c, " appears more than once in the output");
    STRATA_CHECK(count[l] > 0, "einsum(): output subscript ", c,
                 " does not appear in the equation for any input operand");
    seen[l] = true;
    p.output.push_back(l);
  }
  // Ellipsis dims that an explicit output leaves out are summed, as in torch.
  return p;
}

// Takes the diagonal of every label repeated within one operand.
Term take_diagonals(Tensor t, std::vector<int> labels, size_t operand) {
  for (size_t i = 0; i < labels.size(); ++i) {
    for (size_t j = i + 1; j < labels.size();) {
      if (labels[j] != labels[i]) {
        ++j;
        continue;
      }
      STRATA_CHECK(t.size(int64_t(i)) == t.size(int64_t(j)), "einsum(): subscript ", label_char(labels[i]),
                   " is repeated for operand ", operand, " but the sizes don't match, ", t.size(int64_t(j)),
                   " != ", t.size(int64_t(i)));
      // diagonal() drops both dims and appends the diagonal last: move it back to i.
      t = movedim(diagonal(t, 0, int64_t(i), int64_t(j)), std::vector<int64_t>{-1}, std::vector<int64_t>{int64_t(i)});
      labels.erase(labels.begin() + static_cast<std::ptrdiff_t>(j));
    }
  }
  return {std::move(t), std::move(labels)};
}

bool contains(const std::vector<int>& v, int l) { return std::find(v.begin(), v.end(), l) != v.end(); }

// Sums the dims of `term` whose labels are not in `keep`.
void sum_unneeded(Term& term, const std::vector<int>& keep) {
  std::vector<int64_t> dims;
  std::vector<int> kept;
  for (size_t d = 0; d < term.labels.size(); ++d) {
    if (contains(keep, term.labels[d])) {
      kept.push_back(term.labels[d]);
    } else {
      dims.push_back(int64_t(d));
    }
  }
  if (dims.empty()) return;
  term.t = sum(term.t, IntArrayRef(dims));
  term.labels = std::move(kept);
}

int64_t label_size(const Term& t, int l) {
  for (size_t d = 0; d < t.labels.size(); ++d)
    if (t.labels[d] == l) return t.t.size(int64_t(d));
  return 1;
}

// Permutes `t` so that its dims follow `order`; labels of `order` that t
// lacks become size-1 dims. With expand_all, every dim is then expanded to
// `sizes` (size-1 broadcast dims included), as bmm needs equal extents.
Tensor arrange(const Term& t, const std::vector<int>& order, const std::vector<int64_t>& sizes, bool expand_all) {
  std::vector<int64_t> perm;
  for (int l : order) {
    for (size_t d = 0; d < t.labels.size(); ++d)
      if (t.labels[d] == l) perm.push_back(int64_t(d));
  }
  Tensor r = permute(t.t, perm);
  // Insert size-1 dims for missing labels.
  size_t k = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    if (k < t.labels.size() && contains(t.labels, order[i])) {
      ++k;
    } else {
      r = unsqueeze(r, int64_t(i));
    }
  }
  if (expand_all) {
    bool need = false;
    for (size_t i = 0; i < order.size(); ++i) need = need || r.size(int64_t(i)) != sizes[i];
    if (need) r = expand(r, sizes);
  }
  return r;
}

int64_t prod_of(const std::vector<int64_t>& v, size_t a, size_t b) {
  int64_t p = 1;
  for (size_t i = a; i < b; ++i) p *= v[i];
  return p;
}

// Contracts a and b over the labels neither `keep` (the output and the other
// operands) needs; the result keeps batch labels (in both), then a's own, then b's.
Term contract(Term a, Term b, const std::vector<int>& keep) {
  sum_unneeded(a, [&] {
    std::vector<int> k = keep;
    k.insert(k.end(), b.labels.begin(), b.labels.end());
    return k;
  }());
  sum_unneeded(b, [&] {
    std::vector<int> k = keep;
    k.insert(k.end(), a.labels.begin(), a.labels.end());
    return k;
  }());
  std::vector<int> batch, a_only, b_only, summed;
  for (int l : a.labels) {
    if (contains(b.labels, l)) {
      (contains(keep, l) ? batch : summed).push_back(l);
    } else {
      a_only.push_back(l);
    }
  }
  for (int l : b.labels)
    if (!contains(a.labels, l)) b_only.push_back(l);
  auto size_of = [&](int l) {
    const int64_t sa = label_size(a, l), sb = label_size(b, l);
    if (sa != sb && sa != 1 && sb != 1) {
      throw Error(str("einsum(): operands do not broadcast with remapped shapes: subscript ",
                      l < kLetters ? std::string(1, label_char(l)) : std::string("..."), " has size ", sa, " in ",
                      a.t.shape_str(), " and ", sb, " in ", b.t.shape_str()));
    }
    return sa == 1 ? sb : sa;
  };
  std::vector<int> out_labels = batch;
  out_labels.insert(out_labels.end(), a_only.begin(), a_only.end());
  out_labels.insert(out_labels.end(), b_only.begin(), b_only.end());
  if (summed.empty()) {
    // Nothing to sum: a broadcast multiply is the whole product.
    std::vector<int64_t> unused;
    Tensor r = mul(arrange(a, out_labels, unused, false), arrange(b, out_labels, unused, false));
    return {std::move(r), std::move(out_labels)};
  }
  std::vector<int64_t> bs, as, bos, ks;
  for (int l : batch) bs.push_back(size_of(l));
  for (int l : a_only) as.push_back(label_size(a, l));
  for (int l : b_only) bos.push_back(label_size(b, l));
  for (int l : summed) ks.push_back(size_of(l));
  std::vector<int> a_order = batch, b_order = batch;
  a_order.insert(a_order.end(), a_only.begin(), a_only.end());
  a_order.insert(a_order.end(), summed.begin(), summed.end());
  b_order.insert(b_order.end(), summed.begin(), summed.end());
  b_order.insert(b_order.end(), b_only.begin(), b_only.end());
  std::vector<int64_t> a_sizes = bs, b_sizes = bs;
  a_sizes.insert(a_sizes.end(), as.begin(), as.end());
  a_sizes.insert(a_sizes.end(), ks.begin(), ks.end());
  b_sizes.insert(b_sizes.end(), ks.begin(), ks.end());
  b_sizes.insert(b_sizes.end(), bos.begin(), bos.end());
  const int64_t B = prod_of(bs, 0, bs.size()), M = prod_of(as, 0, as.size()), N = prod_of(bos, 0, bos.size()),
                K = prod_of(ks, 0, ks.size());
  Tensor am = reshape(arrange(a, a_order, a_sizes, true), DimVector{B, M, K});
  Tensor bm = reshape(arrange(b, b_order, b_sizes, true), DimVector{B, K, N});
  std::vector<int64_t> r_sizes = bs;
  r_sizes.insert(r_sizes.end(), as.begin(), as.end());
  r_sizes.insert(r_sizes.end(), bos.begin(), bos.end());
  return {reshape(bmm(am, bm), r_sizes), std::move(out_labels)};
}

// How good contracting a and b next is, smaller first: the growth in stored
// elements (the result's size minus both inputs'; it favours contractions that
// sum labels away over outer products), then the multiply-adds (the product of
// every label's size). `keep`: the labels the output or other operands need.
std::pair<double, double> contraction_cost(const Term& a, const Term& b, const std::vector<int>& keep) {
  double flops = 1, result = 1;
  std::vector<int> seen;
  for (const Term* t : {&a, &b}) {
    for (size_t d = 0; d < t->labels.size(); ++d) {
      const int l = t->labels[d];
      if (contains(seen, l)) continue;
      seen.push_back(l);
      const double n = double(std::max<int64_t>(t->t.size(int64_t(d)), 1));
      flops *= n;
      if (contains(keep, l)) result *= n;
    }
  }
  return {result - double(a.t.numel()) - double(b.t.numel()), flops};
}

// Labels that the output or any operand other than skip_a/skip_b uses.
std::vector<int> needed_labels(const std::vector<Term>& terms, size_t skip_a, size_t skip_b,
                               const std::vector<int>& output) {
  std::vector<int> k = output;
  for (size_t i = 0; i < terms.size(); ++i) {
    if (i == skip_a || i == skip_b) continue;
    for (int l : terms[i].labels)
      if (!contains(k, l)) k.push_back(l);
  }
  return k;
}

Tensor einsum_impl(std::string_view equation, TensorList tensors, OptIntArrayRef path) {
  Parsed p = parse(equation, tensors);
  for (size_t i = 1; i < tensors.size(); ++i) {
    STRATA_CHECK(tensors[i].dtype() == tensors[0].dtype(), "einsum(): expected all operands to have the same dtype, "
                 "but operand 0 is ", dtype_name(tensors[0].dtype()), " and operand ", i, " is ",
                 dtype_name(tensors[i].dtype()));
    STRATA_CHECK(tensors[i].device() == tensors[0].device(), "einsum(): expected all operands on the same device, "
                 "but got ", tensors[0].device().str(), " and ", tensors[i].device().str());
  }
  std::vector<Term> terms;
  for (size_t i = 0; i < tensors.size(); ++i) terms.push_back(take_diagonals(tensors[i], p.inputs[i], i));
  // Sum every label only one operand uses and the output does not.
  if (terms.size() > 1) {
    for (size_t i = 0; i < terms.size(); ++i) sum_unneeded(terms[i], needed_labels(terms, i, i, p.output));
  }
  // Size-1 broadcasting is allowed; any other mismatch is an error (checked
  // here for all operands, not only the pairs contracted).
  for (int l = 0; l < kLetters * 2; ++l) {
    int64_t size = 1;
    for (size_t i = 0; i < terms.size(); ++i) {
      const int64_t s = label_size(terms[i], l);
      if (s == 1) continue;
      if (!contains(terms[i].labels, l)) continue;
      STRATA_CHECK(size == 1 || size == s, "einsum(): subscript ",
                   l < kLetters ? std::string(1, label_char(l)) : std::string("..."), " has size ", s, " for operand ",
                   i, " which does not broadcast with previously seen size ", size);
      size = s;
    }
  }
  if (path && terms.size() > 1) {
    const auto& pl = *path;
    STRATA_CHECK(pl.size() == 2 * (terms.size() - 1), "einsum(): the path must list ", terms.size() - 1,
                 " pairs of operands (", 2 * (terms.size() - 1), " indices), but got ", pl.size(), " indices");
    for (size_t s = 0; s + 1 < pl.size(); s += 2) {
      int64_t i = pl[s], j = pl[s + 1];
      const int64_t n = static_cast<int64_t>(terms.size());
      STRATA_CHECK(i >= 0 && j >= 0 && i < n && j < n && i != j, "einsum(): path step (", i, ", ", j,
                   ") does not name two of the ", n, " operands left");
      if (i > j) std::swap(i, j);
      Term r = contract(terms[size_t(i)], terms[size_t(j)], needed_labels(terms, size_t(i), size_t(j), p.output));
      terms.erase(terms.begin() + j);
      terms.erase(terms.begin() + i);
      terms.push_back(std::move(r));
    }
  }
  while (terms.size() > 1) {
    // Greedy: contract the best pair next by contraction_cost.
    size_t bi = 0, bj = 1;
    std::pair<double, double> best{std::numeric_limits<double>::infinity(), 0.0};
    for (size_t i = 0; i < terms.size(); ++i) {
      for (size_t j = i + 1; j < terms.size(); ++j) {
        const auto c = contraction_cost(terms[i], terms[j], needed_labels(terms, i, j, p.output));
        if (c < best) {
          best = c;
          bi = i;
          bj = j;
        }
      }
    }
    Term r = contract(terms[bi], terms[bj], needed_labels(terms, bi, bj, p.output));
    terms.erase(terms.begin() + static_cast<std::ptrdiff_t>(bj));
    terms.erase(terms.begin() + static_cast<std::ptrdiff_t>(bi));
    terms.push_back(std::move(r));
  }
  Term& last = terms[0];
  sum_unneeded(last, p.output);
  std::vector<int64_t> perm;
  for (int l : p.output) {
    auto it = std::find(last.labels.begin(), last.labels.end(), l);
    // An output label that only a size-1 broadcast dim carried can have been
    // summed away with it; it comes back as a size-1 dim.
    if (it == last.labels.end()) {
      last.t = unsqueeze(last.t, last.t.dim());
      last.labels.push_back(l);
      it = last.labels.end() - 1;
    }
    perm.push_back(it - last.labels.begin());
  }
  Tensor r = permute(last.t, perm);
  // A lone operand that only needed a permutation comes back as a view of
  // its input, as torch's does.
  return r;
}

}  // namespace

STRATA_IMPL_COMPOSITE(einsum, einsum_impl);

}  // namespace strata
