// Tests of the schema parser (src/dispatch/schema.h) and of the schemas of
// the built-in ops as registered with the dispatcher.
#include <gtest/gtest.h>

#include "dispatch/dispatcher.h"
#include "dispatch/schema.h"
#include "ops/op_list.h"

using namespace strata;

TEST(Schema, ArgumentsDefaultsAndKwargOnly) {
  FunctionSchema s = parse_schema("add(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!)? out=None) -> Tensor");
  EXPECT_EQ(s.name, "add");
  EXPECT_EQ(s.overload, "");
  EXPECT_EQ(s.full_name(), "add");
  ASSERT_EQ(s.args.size(), 4u);
  EXPECT_EQ(s.args[0].name, "self");
  EXPECT_EQ(s.args[0].type, ArgType::Tensor);
  EXPECT_FALSE(s.args[0].kwarg_only);
  EXPECT_FALSE(s.args[0].default_value.has_value());
  EXPECT_EQ(s.args[2].name, "alpha");
  EXPECT_EQ(s.args[2].type, ArgType::Scalar);
  EXPECT_TRUE(s.args[2].kwarg_only);
  ASSERT_TRUE(s.args[2].default_value.has_value());
  EXPECT_EQ(s.args[2].default_value->to_scalar().to_int(), 1);
  EXPECT_EQ(s.args[3].type, ArgType::OptTensor);
  EXPECT_TRUE(s.args[3].is_write);
  EXPECT_TRUE(s.args[3].default_value->is_none());
  ASSERT_EQ(s.returns.size(), 1u);
  EXPECT_EQ(s.returns[0], ArgType::Tensor);
  EXPECT_FALSE(s.is_inplace());
}

TEST(Schema, EveryArgumentType) {
  FunctionSchema s = parse_schema(
      "t.ov(Tensor a, Tensor? b, Tensor[] c, Scalar d, Scalar? e, int f, int? g, int[] h, int[2] i=1, int[]? j=None, "
      "float k=0.5, float? l=None, bool m=True, bool? n=None, ScalarType o=float32, ScalarType? p=None, "
      "str q='mean', str? r=None, Device? s=None, SymInt u=3, float v=-inf, float w=1e-5) -> Tensor");
  std::vector<ArgType> want = {ArgType::Tensor,    ArgType::OptTensor, ArgType::TensorList, ArgType::Scalar,
                               ArgType::OptScalar, ArgType::Int,       ArgType::OptInt,     ArgType::IntList,
                               ArgType::IntList,   ArgType::OptIntList, ArgType::Float,     ArgType::OptFloat,
                               ArgType::Bool,      ArgType::OptBool,   ArgType::DType,      ArgType::OptDType,
                               ArgType::Str,       ArgType::OptStr,    ArgType::OptDevice,  ArgType::Int,
                               ArgType::Float,     ArgType::Float};
  ASSERT_EQ(s.args.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(s.args[i].type, want[i]) << s.args[i].name;
  EXPECT_EQ(s.name, "t");
  EXPECT_EQ(s.overload, "ov");
  EXPECT_EQ(s.full_name(), "t.ov");
  EXPECT_EQ(s.args[8].list_size, 2);
  EXPECT_EQ(s.args[8].default_value->to_int_list(), std::vector<int64_t>{1});  // expanded by the binding
  EXPECT_EQ(s.args[7].list_size, 0);
  EXPECT_DOUBLE_EQ(s.args[10].default_value->to_double(), 0.5);
  EXPECT_TRUE(s.args[12].default_value->to_bool());
  EXPECT_EQ(s.args[14].default_value->to_dtype(), ScalarType::Float32);
  EXPECT_EQ(s.args[16].default_value->to_string(), "mean");
  EXPECT_EQ(s.args[19].default_value->to_int(), 3);
  EXPECT_TRUE(std::isinf(s.args[20].default_value->to_double()));
  EXPECT_LT(s.args[20].default_value->to_double(), 0);
  EXPECT_DOUBLE_EQ(s.args[21].default_value->to_double(), 1e-5);
}

TEST(Schema, ReturnsAndNames) {
  FunctionSchema a = parse_schema("max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)");
  ASSERT_EQ(a.returns.size(), 1u);
  EXPECT_EQ(a.returns[0], ArgType::TensorTuple2);
  EXPECT_EQ(a.return_names, (std::vector<std::string>{"values", "indices"}));
  FunctionSchema b = parse_schema("f(Tensor x) -> (Tensor, Tensor, Tensor)");
  EXPECT_EQ(b.returns[0], ArgType::TensorTuple3);
  EXPECT_EQ(b.return_names, (std::vector<std::string>{"", "", ""}));
  FunctionSchema c = parse_schema("split(Tensor self, int size) -> Tensor[]");
  EXPECT_EQ(c.returns[0], ArgType::TensorList);
  FunctionSchema d = parse_schema("add_(Tensor(a!) self, Tensor other) -> Tensor(a!)");
  EXPECT_TRUE(d.is_inplace());
  EXPECT_TRUE(d.args[0].is_write);
  EXPECT_FALSE(d.args[1].is_write);
  EXPECT_EQ(d.returns[0], ArgType::Tensor);
  FunctionSchema e = parse_schema("myext::scaled_add(Tensor a, Tensor b, float alpha) -> Tensor");
  EXPECT_EQ(e.name, "myext::scaled_add");
  EXPECT_EQ(e.full_name(), "myext::scaled_add");
}

TEST(Schema, MalformedSchemasRaise) {
  for (const char* bad : {
           "noparens -> Tensor",
           "f(Tensor x)",
           "f(Tensor x) -> ",
           "f(Tensor) -> Tensor",
           "f(Banana x) -> Tensor",
           "f(Tensor x) -> Banana",
           "f(int x=abc) -> Tensor",
           "f(float x=1.2.3.4e) -> Tensor",
           "f(int[] x=[1, b]) -> Tensor",
           "f(ScalarType t=nosuchtype) -> Tensor",
           "f(Tensor x -> Tensor",
           "(Tensor x) -> Tensor",
           "f(int[abc] x) -> Tensor",
           "f(str s=') -> Tensor",
       }) {
    EXPECT_THROW(parse_schema(bad), Error) << bad;
  }
}

TEST(Schema, BuiltinOpsAreConsistent) {
  Dispatcher& d = Dispatcher::get();
  ASSERT_GE(d.num_ops(), static_cast<size_t>(OpId::NumBuiltinOps));
  for (int i = 0; i < static_cast<int>(OpId::NumBuiltinOps); ++i) {
    const OperatorEntry& op = d.op(i);
    EXPECT_EQ(op.id(), i);
    EXPECT_EQ(std::string(op_entry_name(static_cast<OpId>(i))), op.schema().full_name());
    EXPECT_EQ(d.find(op.schema().full_name()), &op);
    // The schema text round-trips through the parser.
    FunctionSchema again = parse_schema(op.schema().text);
    EXPECT_EQ(again.args.size(), op.schema().args.size()) << op.schema().text;
    // out= arguments are keyword-only and written in place.
    for (const Argument& a : op.schema().args) {
      if (a.name == "out") {
        EXPECT_TRUE(a.kwarg_only) << op.schema().text;
        EXPECT_TRUE(a.is_write) << op.schema().text;
      }
    }
    // In-place ops write their first argument.
    if (op.schema().is_inplace()) {
      ASSERT_FALSE(op.schema().args.empty()) << op.schema().text;
      EXPECT_TRUE(op.schema().args[0].is_write) << op.schema().text;
    }
    // Every declared op has at least one kernel somewhere.
    bool any = false;
    for (int k = 0; k < kNumDispatchKeys; ++k) any |= op.has_registered(static_cast<DispatchKey>(k));
    EXPECT_TRUE(any) << "op " << op.schema().full_name() << " is declared but has no kernel";
  }
}
