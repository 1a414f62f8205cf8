package io.metastore.registry;

import io.apicurio.common.apps.config.DynamicConfigPropertyList;
import java.util.List;
import javax.enterprise.context.ApplicationScoped;
import javax.enterprise.inject.Produces;

/**
 * The bean the build step of Apicurio's config-index extension would make (that step is not on
 * Maven Central): the list of properties that may change at run time. None may here.
 */
@ApplicationScoped
public class ConfigIndexBeans {
    @Produces
    @ApplicationScoped
    DynamicConfigPropertyList dynamicConfigProperties() {
        return new DynamicConfigPropertyList(List.of());
    }
}
