//===- Module.cpp - The Python module paxc's native part (paxc._paxc) -----===//
//
// The driver library (tools/driver) for Python: compile a model into a
// plan, load and save plans, run or train a plan in a Session. numpy
// arrays in, numpy arrays out; every error a paxc.Error carrying paxc's
// message; the GIL released while compiling and running.
//
//===----------------------------------------------------------------------===//
#include "codegen/plan/PlanFile.h"
#include "tools/driver/Driver.h"
#include "tools/driver/Session.h"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <stdexcept>

namespace py = pybind11;
using namespace pax;

namespace {

/// What paxc.Error carries: paxc's message.
struct PaxcError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// \p value, or a PaxcError with \p e's message.
template <typename T> T orThrow(llvm::Expected<T> value) {
  if (!value)
    throw PaxcError(llvm::toString(value.takeError()));
  return std::move(*value);
}

void orThrow(llvm::Error err) {
  if (err)
    throw PaxcError(llvm::toString(std::move(err)));
}

/// A plan and what its compile reported.
struct PyPlan {
  driver::Compiled compiled;
};

/// The plan element type of a numpy array's, or a PaxcError naming \p what.
plan::DType dtypeOf(const py::array &a, const std::string &what) {
  char kind = a.dtype().kind();
  size_t size = size_t(a.itemsize());
  struct Map {
    char kind;
    size_t size;
    plan::DType dtype;
  };
  static const Map maps[] = {
      {'f', 4, plan::F32}, {'f', 8, plan::F64}, {'f', 2, plan::F16},
      {'i', 1, plan::I8},  {'i', 2, plan::I16}, {'i', 4, plan::I32},
      {'i', 8, plan::I64}, {'u', 1, plan::U8},  {'u', 2, plan::U16},
      {'u', 4, plan::U32}, {'u', 8, plan::U64}, {'b', 1, plan::I1}};
  for (const Map &m : maps)
    if (m.kind == kind && m.size == size)
      return m.dtype;
  throw PaxcError(what + ": numpy's " + std::string(py::str(a.dtype())) +
                  " is not an element type paxc runs");
}

/// \p obj (anything numpy takes as an array) as a runtime tensor.
runtime::Tensor toTensor(const py::handle &obj, const std::string &what) {
  auto a = py::array::ensure(obj, py::array::c_style);
  if (!a)
    throw PaxcError(what + ": not an array");
  if (a.dtype().byteorder() == '>')
    throw PaxcError(what + ": a big-endian array (convert it with "
                           "x.astype(x.dtype.newbyteorder('=')))");
  plan::DType dtype = dtypeOf(a, what);
  std::vector<int64_t> shape(a.shape(), a.shape() + a.ndim());
  runtime::Tensor t = runtime::Tensor::zeros(dtype, shape);
  if (t.data.size() != size_t(a.nbytes()))
    throw PaxcError(what + ": its bytes do not match its shape");
  std::memcpy(t.data.data(), a.data(), t.data.size());
  return t;
}

/// \p t as a numpy array (bfloat16 as float32, which numpy lacks).
py::array toArray(const runtime::Tensor &t) {
  std::vector<py::ssize_t> shape(t.shape.begin(), t.shape.end());
  auto copy = [&](auto zero) {
    py::array_t<decltype(zero)> a(shape);
    std::memcpy(a.mutable_data(), t.data.data(), t.data.size());
    return py::array(a);
  };
  switch (t.dtype) {
  case plan::F32:
    return copy(float());
  case plan::F64:
    return copy(double());
  case plan::I8:
    return copy(int8_t());
  case plan::I16:
    return copy(int16_t());
  case plan::I32:
    return copy(int32_t());
  case plan::I64:
    return copy(int64_t());
  case plan::U8:
    return copy(uint8_t());
  case plan::U16:
    return copy(uint16_t());
  case plan::U32:
    return copy(uint32_t());
  case plan::U64:
    return copy(uint64_t());
  case plan::I1:
    return copy(bool());
  case plan::F16: {
    py::array a(py::dtype("float16"), shape);
    std::memcpy(a.mutable_data(), t.data.data(), t.data.size());
    return a;
  }
  default: {
    py::array_t<float> a(shape);
    for (int64_t i = 0; i < t.numel(); ++i)
      a.mutable_data()[i] = float(t.real(i));
    return py::array(a);
  }
  }
}

/// A feeds dict as named tensors.
driver::NamedTensors toFeeds(const py::dict &feeds) {
  driver::NamedTensors out;
  for (auto [key, value] : feeds) {
    if (!py::isinstance<py::str>(key))
      throw PaxcError("a feed's name must be a str, not " +
                      std::string(py::str(py::type::of(key))));
    std::string name = key.cast<std::string>();
    out.push_back({name, toTensor(value, "feed '" + name + "'")});
  }
  return out;
}

py::dict toDict(const driver::NamedTensors &outputs) {
  py::dict out;
  for (const auto &[name, t] : outputs)
    out[py::str(name)] = toArray(t);
  return out;
}

/// A tensor's name, element type and shape, for Plan.inputs and outputs.
py::list
describe(const google::protobuf::RepeatedPtrField<plan::TensorInfo> &ts) {
  py::list out;
  for (const plan::TensorInfo &t : ts)
    out.append(py::make_tuple(
        t.name(), driver::dtypeName(t.dtype()),
        std::vector<int64_t>(t.shape().begin(), t.shape().end())));
  return out;
}

PyPlan
compile(const std::string &model, const py::bytes &bytes,
        const std::vector<std::pair<std::string, std::string>> &options) {
  driver::CompileOptions o{model, std::string(bytes), options};
  py::gil_scoped_release release;
  return PyPlan{orThrow(driver::compile(o))};
}

PyPlan loadPlan(const std::string &path) {
  py::gil_scoped_release release;
  driver::Compiled c;
  c.plan = orThrow(driver::loadPlan(path));
  c.modelPath = c.plan.source();
  return PyPlan{std::move(c)};
}

void bindPlan(py::module_ &m) {
  py::class_<PyPlan>(m, "Plan")
      .def_property_readonly(
          "report_json", [](const PyPlan &p) { return p.compiled.reportJson; })
      .def_property_readonly(
          "report_text", [](const PyPlan &p) { return p.compiled.reportText; })
      .def_property_readonly(
          "model_path", [](const PyPlan &p) { return p.compiled.modelPath; })
      .def_property_readonly(
          "devices", [](const PyPlan &p) { return p.compiled.plan.devices(); })
      .def_property_readonly(
          "inputs",
          [](const PyPlan &p) { return describe(p.compiled.plan.inputs()); })
      .def_property_readonly(
          "outputs",
          [](const PyPlan &p) { return describe(p.compiled.plan.outputs()); })
      .def("save", [](const PyPlan &p, const std::string &path) {
        orThrow(writePlanFile(p.compiled.plan, path));
      });
}

void bindSession(py::module_ &m) {
  py::class_<driver::Session>(m, "Session")
      .def(py::init([](const PyPlan &p, const std::string &backend,
                       const std::string &devices) {
             driver::SessionOptions o;
             o.backend = backend;
             o.devices = devices;
             py::gil_scoped_release release;
             return orThrow(driver::Session::open(p.compiled.plan, o));
           }),
           py::arg("plan"), py::arg("backend") = "cpu",
           py::arg("devices") = "threads")
      .def("run",
           [](driver::Session &s, const py::dict &feeds) {
             driver::NamedTensors in = toFeeds(feeds);
             driver::NamedTensors out;
             {
               py::gil_scoped_release release;
               out = orThrow(s.run(in));
             }
             return toDict(out);
           })
      .def("train_step",
           [](driver::Session &s, const py::dict &feeds) {
             driver::NamedTensors in = toFeeds(feeds);
             py::gil_scoped_release release;
             return orThrow(s.trainStep(in));
           })
      .def_property_readonly("step", &driver::Session::step)
      .def("save_model",
           [](driver::Session &s, const std::string &path) {
             py::gil_scoped_release release;
             orThrow(s.saveModel(path));
           })
      .def("save_checkpoint",
           [](driver::Session &s, const std::string &dir) {
             py::gil_scoped_release release;
             orThrow(s.saveCheckpoint(dir));
           })
      .def("load_checkpoint", [](driver::Session &s, const std::string &dir) {
        py::gil_scoped_release release;
        orThrow(s.loadCheckpoint(dir));
      });
}

} // namespace

PYBIND11_MODULE(_paxc, m) {
  m.doc() = "paxc's native part: the driver library (use the paxc package)";
  py::register_exception<PaxcError>(m, "Error", PyExc_RuntimeError);
  m.def("compile", &compile, py::arg("model"), py::arg("model_bytes"),
        py::arg("options"));
  m.def("load_plan", &loadPlan, py::arg("path"));
  bindPlan(m);
  bindSession(m);
}
