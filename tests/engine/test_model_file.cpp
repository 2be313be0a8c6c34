#include <hdf5.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "halo/core/error.hpp"
#include "halo/core/layer_type.hpp"
#include "halo/core/model.hpp"
#include "halo/core/result.hpp"
#include "halo/store/model_file.hpp"
#include "halo_test.hpp"

namespace {

void expect_error(const std::filesystem::path& path, const std::string& needle)
{
    try {
        halo::read_model(path);
        FAIL() << "expected an error containing '" << needle << "'";
    } catch (const halo::Error& e) {
        EXPECT_NE(e.message().find(needle), std::string::npos) << e.message();
    }
}

// Rewrites float dataset `name` of layer 0 with `values` (same shape), through the HDF5 C API.
void overwrite_layer0(const std::filesystem::path& path, const char* name,
                      const std::vector<float>& values)
{
    const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(file, 0);
    const std::string full = std::string("/layers/0/") + name;
    const hid_t ds = H5Dopen2(file, full.c_str(), H5P_DEFAULT);
    ASSERT_GE(ds, 0);
    ASSERT_GE(H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), 0);
    H5Dclose(ds);
    H5Fclose(file);
}

void set_string_attribute(const std::filesystem::path& path, const char* object, const char* name,
                          const char* value)
{
    const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(file, 0);
    H5Adelete_by_name(file, object, name, H5P_DEFAULT);
    const hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, H5T_VARIABLE);
    const hid_t space = H5Screate(H5S_SCALAR);
    const hid_t attr =
        H5Acreate_by_name(file, object, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(attr, 0);
    ASSERT_GE(H5Awrite(attr, type, &value), 0);
    H5Aclose(attr);
    H5Sclose(space);
    H5Tclose(type);
    H5Fclose(file);
}

}  // namespace

// Every type of the table (halo/core/layer_type.hpp), so that a new type is covered by its entry.
TEST(ModelFile, RoundTripOfEveryLayerType)
{
    const auto dir = halo::testing::scratch_dir("model");
    ASSERT_GE(halo::layer_types().size(), 8u);
    for (const auto* info : halo::layer_types()) {
        const auto type = info->type;
        halo::RandomModelOptions ropt;
        ropt.k = 3;
        ropt.heads = type == halo::LayerType::gat ? 2 : 1;
        auto model = halo::random_model(type, {7, 6, 4}, 4, ropt);
        if (type == halo::LayerType::agnn) {
            // A weightless propagation layer, as PyG's AGNN model stacks them.
            halo::Layer prop = model.layers.back();
            prop.in_dim = prop.out_dim;
            prop.weight.clear();
            prop.bias.clear();
            model.layers.push_back(prop);
        }
        const auto path = dir / (halo::to_string(type) + ".h5");
        halo::write_model(path, model);
        const auto back = halo::read_model(path);
        ASSERT_EQ(back.layers.size(), model.layers.size());
        EXPECT_EQ(back.name, model.name);
        for (std::size_t l = 0; l < model.layers.size(); ++l) {
            const auto& a = model.layers[l];
            const auto& b = back.layers[l];
            EXPECT_EQ(a.type, b.type);
            EXPECT_EQ(a.activation, b.activation);
            EXPECT_EQ(a.in_dim, b.in_dim);
            EXPECT_EQ(a.out_dim, b.out_dim);
            EXPECT_EQ(a.hidden_dim, b.hidden_dim);
            EXPECT_EQ(a.eps, b.eps);
            EXPECT_EQ(a.weight, b.weight);
            EXPECT_EQ(a.bias, b.bias);
            EXPECT_EQ(a.root_weight, b.root_weight);
            EXPECT_EQ(a.weight2, b.weight2);
            EXPECT_EQ(a.bias2, b.bias2);
            EXPECT_EQ(a.k, b.k);
            EXPECT_EQ(a.beta, b.beta);
            EXPECT_EQ(a.heads, b.heads);
            EXPECT_EQ(a.negative_slope, b.negative_slope);
            EXPECT_EQ(a.att_src, b.att_src);
            EXPECT_EQ(a.att_dst, b.att_dst);
            EXPECT_EQ(a.query_weight, b.query_weight);
            EXPECT_EQ(a.query_bias, b.query_bias);
            EXPECT_EQ(a.key_weight, b.key_weight);
            EXPECT_EQ(a.key_bias, b.key_bias);
            EXPECT_EQ(a.value_weight, b.value_weight);
            EXPECT_EQ(a.value_bias, b.value_bias);
            EXPECT_EQ(a.extra_arrays, b.extra_arrays);
            EXPECT_EQ(a.extra_scalars, b.extra_scalars);
            std::int64_t floats = 0;
            for (const auto& array : info->arrays) {
                EXPECT_EQ(array.of(a), array.of(b)) << info->name << " " << array.name;
                floats += static_cast<std::int64_t>(array.of(a).size());
            }
            for (const auto& scalar : info->scalars) {
                EXPECT_EQ(scalar.get(a), scalar.get(b)) << info->name << " " << scalar.name;
            }
            EXPECT_EQ(halo::parameter_bytes(a), 4 * floats);
        }
        // No temporary file is left behind.
        for (const auto& entry : std::filesystem::directory_iterator(dir)) {
            EXPECT_EQ(entry.path().string().find(".tmp-"), std::string::npos) << entry.path();
        }
    }
}

// The weight bytes count every array: gat's attention vectors and the transformer's q/k/v biases
// too (the engine's estimate missed them before the table).
TEST(ModelFile, ParameterBytesCountEveryArray)
{
    halo::RandomModelOptions ropt;
    ropt.heads = 2;
    const auto gat = halo::random_model(halo::LayerType::gat, {5, 4}, 3, ropt).layers.front();
    EXPECT_EQ(halo::parameter_bytes(gat), 4 * (5 * 4 + 4 + 4 + 4));
    const auto t = halo::random_model(halo::LayerType::transformer, {5, 4}, 3).layers.front();
    EXPECT_EQ(halo::parameter_bytes(t), 4 * (4 * 5 * 4 + 4 * 4));
}

// An array that the layer's type does not hold is refused, not silently dropped by the writer.
TEST(ModelFile, ValidateRejectsArraysTheTypeDoesNotHold)
{
    auto model = halo::random_model(halo::LayerType::gcn, {4, 3}, 2);
    model.layers[0].weight2.assign(9, 0.5f);
    try {
        halo::validate_model(model, "m");
        FAIL() << "a gcn layer with weight2 was accepted";
    } catch (const halo::InputError& e) {
        EXPECT_NE(e.message().find("m: gcn layer 0 has a 'weight2'"), std::string::npos)
            << e.message();
    }
    model.layers[0].weight2.clear();
    model.layers[0].extra_arrays["gamma"] = {1.0f};
    EXPECT_THROW(halo::validate_model(model, "m"), halo::InputError);
}

TEST(ModelFile, LayerWithoutBiasRoundTrips)
{
    const auto dir = halo::testing::scratch_dir("model");
    auto model = halo::random_model(halo::LayerType::gcn, {4, 2}, 1);
    model.layers[0].bias.clear();
    halo::write_model(dir / "m.h5", model);
    EXPECT_TRUE(halo::read_model(dir / "m.h5").layers[0].bias.empty());
}

TEST(ModelFile, RejectsBadFiles)
{
    const auto dir = halo::testing::scratch_dir("model");
    const auto good = dir / "good.h5";
    halo::write_model(good, halo::random_model(halo::LayerType::sage, {4, 3, 2}, 2));

    expect_error(dir / "missing.h5", "missing.h5");

    const auto text = dir / "text.h5";
    std::ofstream(text) << "not hdf5\n";
    expect_error(text, "text.h5");

    const auto nan = dir / "nan.h5";
    std::filesystem::copy_file(good, nan);
    std::vector<float> w(12, 0.5f);
    w[5] = std::nanf("");
    overwrite_layer0(nan, "weight", w);
    expect_error(nan, "layer 0 weight[5] is nan");

    const auto bad_type = dir / "type.h5";
    std::filesystem::copy_file(good, bad_type);
    set_string_attribute(bad_type, "/layers/1", "type", "gatv2");
    expect_error(bad_type, "/layers/1: unknown layer type 'gatv2'");

    // A layer of a type whose own fields are missing (a gcn layer relabelled gat).
    const auto missing = dir / "missing.h5";
    std::filesystem::copy_file(good, missing);
    set_string_attribute(missing, "/layers/1", "type", "gat");
    expect_error(missing, "/layers/1: attribute heads: missing");

    const auto bad_format = dir / "format.h5";
    std::filesystem::copy_file(good, bad_format);
    set_string_attribute(bad_format, "/", "format", "halo-dataset");
    expect_error(bad_format, "not a HaloGNN model file");

    // A dataset file is not a model file.
    const auto wrong_act = dir / "act.h5";
    std::filesystem::copy_file(good, wrong_act);
    set_string_attribute(wrong_act, "/layers/0", "activation", "gelu");
    expect_error(wrong_act, "unknown activation 'gelu'");
}

TEST(ModelFile, ValidateRejectsMismatchedWidths)
{
    auto model = halo::random_model(halo::LayerType::gcn, {4, 3, 2}, 2);
    model.layers[1].in_dim = 5;
    model.layers[1].weight.resize(10);
    try {
        halo::validate_model(model, "m.h5");
        FAIL();
    } catch (const halo::InputError& e) {
        EXPECT_NE(e.message().find("m.h5: layer 1 takes width 5 but layer 0 produces 3"),
                  std::string::npos)
            << e.message();
    }
}

TEST(ResultFiles, PiecesAndManifestAssembleByGlobalId)
{
    const auto dir = halo::testing::scratch_dir("result");
    halo::ResultPiece a;
    a.part = 0;
    a.num_parts = 2;
    a.global_ids = {3, 0};
    a.output_dim = 2;
    a.output = {0.5f, 1.5f, 2.0f, -1.0f};
    a.prediction = halo::argmax_rows(a.output, 2);
    EXPECT_EQ(a.prediction, (std::vector<std::int32_t>{1, 0}));
    halo::ResultPiece b = a;
    b.part = 1;
    b.global_ids = {1, 2};
    b.output = {1.0f, 1.0f, -3.0f, 4.0f};
    b.prediction = halo::argmax_rows(b.output, 2);
    EXPECT_EQ(b.prediction, (std::vector<std::int32_t>{0, 1}));  // ties: lowest index
    halo::write_result_piece(dir, a);
    halo::write_result_piece(dir, b);
    // Without the manifest the run is incomplete.
    EXPECT_THROW(halo::read_results(dir), halo::InputError);
    std::ofstream(dir / "manifest.json")
        << R"({"format": "halo-result-manifest", "version": 1, "num_parts": 2, "output_dim": 2,
               "pieces": [{"part": 0, "file": "part-0.h5"}, {"part": 1, "file": "part-1.h5"}]})";
    const auto set = halo::read_results(dir);
    EXPECT_EQ(set.global_ids, (std::vector<halo::global_id>{0, 1, 2, 3}));
    EXPECT_EQ(set.output, (std::vector<float>{2.0f, -1.0f, 1.0f, 1.0f, -3.0f, 4.0f, 0.5f, 1.5f}));
    EXPECT_EQ(set.prediction, (std::vector<std::int32_t>{0, 0, 1, 1}));
    // A node in two pieces is an error.
    b.global_ids = {1, 3};
    halo::write_result_piece(dir, b);
    EXPECT_THROW(halo::read_results(dir), halo::InputError);
}
