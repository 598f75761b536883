//! The OpenAPI documents of the served kinds, built once from
//! k8s-openapi's schemas (kube-apiserver's own definitions, descriptions
//! and all): one OpenAPI v3 document per group-version, the v3 index
//! naming them with their hashes, and the Swagger 2.0 document of them all.
//! Schemas are keyed by their Go package path (`io.k8s.api.core.v1.Pod`)
//! and each served kind carries `x-kubernetes-group-version-kind`, which
//! is how `kubectl explain` finds it.

use std::borrow::Cow;
use std::sync::LazyLock;

use k8s_openapi::api::authentication::v1::{SelfSubjectReview, TokenReview};
use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::schemars::generate::SchemaSettings;
use k8s_openapi::schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde_json::{Map, Value, json};

use super::super::discovery::SCHEMA_GIT_VERSION;
use super::super::document::Document;
use crate::sim::resources::{RESOURCES, Resource};

/// Every document the sim serves under `/openapi`.
pub struct Documents {
    /// `/openapi/v2`.
    pub v2: Document,
    /// `/openapi/v3`: the index.
    pub v3_index: Document,
    /// `/openapi/v3/{path}` by `path` (`api/v1`, `apis/{group}/{version}`).
    pub v3: Vec<(String, Document)>,
}

/// The documents, built on first use.
pub static DOCUMENTS: LazyLock<Documents> = LazyLock::new(Documents::build);

/// A served kind: group, version, kind, and how to generate its schema
/// (returning a reference to its definition).
struct Kind {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    schema: fn(&mut SchemaGenerator) -> Schema,
}

fn built_in<T: k8s_openapi::Resource + JsonSchema>() -> Kind {
    Kind {
        group: T::GROUP,
        version: T::VERSION,
        kind: T::KIND,
        schema: SchemaGenerator::subschema_for::<T>,
    }
}

/// The kinds served: the resources and the review APIs.
fn kinds() -> Vec<Kind> {
    vec![
        built_in::<Namespace>(),
        built_in::<Pod>(),
        built_in::<ConfigMap>(),
        built_in::<ServiceAccount>(),
        built_in::<ClusterRoleBinding>(),
        built_in::<ClusterRole>(),
        built_in::<RoleBinding>(),
        built_in::<Role>(),
        built_in::<TokenReview>(),
        built_in::<SelfSubjectReview>(),
        built_in::<SubjectAccessReview>(),
        Kind {
            group: "example.com",
            version: "v1",
            kind: "Widget",
            schema: SchemaGenerator::subschema_for::<Widget>,
        },
    ]
}

/// The custom resource's schema, as its CustomResourceDefinition declares
/// it (spec and status left open, as the corpus's `widgets`).
struct Widget;

impl JsonSchema for Widget {
    fn schema_name() -> Cow<'static, str> {
        "com.example.v1.Widget".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let mut metadata = generator.subschema_for::<ObjectMeta>();
        metadata.insert(
            "description".into(),
            "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata".into(),
        );
        json_schema!({
            "description": "Widget is the example custom resource.",
            "type": "object",
            "properties": {
                "apiVersion": {
                    "description": "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources",
                    "type": "string",
                },
                "kind": {
                    "description": "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
                    "type": "string",
                },
                "metadata": metadata,
                "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            },
        })
    }
}

/// The schemas of `kinds`, keyed by name, in the form `settings` give
/// (references under their `definitions_path`), each kind's tagged with
/// its group, version and kind, sorted by name as Go marshals a map; and
/// the paths reading each served resource's objects, as kube-apiserver
/// documents them (which `kubectl explain` reads a resource's kind from).
fn schemas_and_paths<'a>(
    settings: SchemaSettings,
    kinds: impl Iterator<Item = &'a Kind>,
    response: fn(Value) -> Value,
) -> (Map<String, Value>, Map<String, Value>) {
    let mut generator = settings.into_generator();
    let mut tagged = Vec::new();
    let mut paths = Map::new();
    for kind in kinds {
        let reference = (kind.schema)(&mut generator);
        let name = reference
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.rsplit('/').next())
            .expect("a kind's schema is a definition")
            .to_string();
        tagged.push((name, kind));
        let served = RESOURCES
            .iter()
            .filter(|r| (r.group, r.version, r.kind) == (kind.group, kind.version, kind.kind));
        for resource in served {
            paths.insert(
                object_path(resource),
                json!({"get": read_operation(resource, response(reference.clone().to_value()))}),
            );
        }
    }
    let mut schemas = generator.take_definitions(true);
    for (name, kind) in tagged {
        schemas[&name]["x-kubernetes-group-version-kind"] =
            json!([{"group": kind.group, "kind": kind.kind, "version": kind.version}]);
    }
    schemas.sort_keys();
    paths.sort_keys();
    (schemas, paths)
}

/// The path of one object of `resource`.
fn object_path(resource: &Resource) -> String {
    let namespace = if resource.namespaced {
        "namespaces/{namespace}/"
    } else {
        ""
    };
    format!(
        "/{}/{namespace}{}/{{name}}",
        path(resource.group, resource.version),
        resource.plural
    )
}

/// The `get` of one object of `resource`, answered 200 as `ok`.
fn read_operation(resource: &Resource, ok: Value) -> Value {
    let group: String = match resource.group {
        "" => "Core".into(),
        group => group
            .split('.')
            .map(|word| {
                let mut chars = word.chars();
                chars.next().map_or_else(String::new, |first| {
                    first.to_uppercase().chain(chars).collect()
                })
            })
            .collect(),
    };
    let version = resource.version.replacen('v', "V", 1);
    let scope = if resource.namespaced {
        "Namespaced"
    } else {
        ""
    };
    json!({
        "description": format!("read the specified {}", resource.kind),
        "operationId": format!("read{group}{version}{scope}{}", resource.kind),
        "responses": {"200": ok, "401": {"description": "Unauthorized"}},
        "x-kubernetes-action": "get",
        "x-kubernetes-group-version-kind": {
            "group": resource.group,
            "version": resource.version,
            "kind": resource.kind,
        },
    })
}

const BEARER_TOKEN: &str = "BearerToken";

fn bearer_token() -> Value {
    json!({
        "type": "apiKey",
        "description": "Bearer Token authentication",
        "name": "authorization",
        "in": "header",
    })
}

/// `api/v1` or `apis/{group}/{version}`.
fn path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

impl Documents {
    fn build() -> Documents {
        let kinds = kinds();
        let info = json!({"title": "Kubernetes", "version": SCHEMA_GIT_VERSION});

        let mut v3_settings = SchemaSettings::openapi3();
        v3_settings.meta_schema = None;
        let mut group_versions: Vec<(&str, &str)> = Vec::new();
        for kind in &kinds {
            if !group_versions.contains(&(kind.group, kind.version)) {
                group_versions.push((kind.group, kind.version));
            }
        }
        let v3: Vec<(String, Document)> = group_versions
            .into_iter()
            .map(|(group, version)| {
                let served = kinds
                    .iter()
                    .filter(|k| k.group == group && k.version == version);
                let (schemas, paths) = schemas_and_paths(v3_settings.clone(), served, |schema| {
                    json!({"description": "OK", "content": {"application/json": {"schema": schema}}})
                });
                let document = json!({
                    "openapi": "3.0.0",
                    "info": info,
                    "paths": paths,
                    "components": {
                        "schemas": schemas,
                        "securitySchemes": {BEARER_TOKEN: bearer_token()},
                    },
                });
                (path(group, version), Document::new(&document))
            })
            .collect();
        let index: Map<String, Value> = v3
            .iter()
            .map(|(path, document)| {
                let url = format!("/openapi/v3/{path}?hash={}", document.hash);
                (path.clone(), json!({"serverRelativeURL": url}))
            })
            .collect();
        let v3_index = Document::new(&json!({"paths": index}));

        // Swagger 2.0 keeps a reference's siblings (its description).
        let mut v2_settings = SchemaSettings::draft07();
        v2_settings.meta_schema = None;
        v2_settings.transforms.clear();
        let (definitions, paths) = schemas_and_paths(
            v2_settings,
            kinds.iter(),
            |schema| json!({"description": "OK", "schema": schema}),
        );
        let v2 = Document::new(&json!({
            "swagger": "2.0",
            "info": info,
            "paths": paths,
            "definitions": definitions,
            "securityDefinitions": {BEARER_TOKEN: bearer_token()},
            "security": [{BEARER_TOKEN: []}],
        }));
        Documents { v2, v3_index, v3 }
    }
}
